package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/repobuild"
)

// riftServer is a real fila-server subprocess with a Rift listener in development mode (the
// "dev" identity may do everything).
type riftServer struct {
	bin, data, certs string
	rift             string // the Rift address it listens on
	cmd              *exec.Cmd
	exited           chan error
}

func startRiftServer(t *testing.T, bin, data, certs string) *riftServer {
	t.Helper()
	s := &riftServer{bin: bin, data: data, certs: certs, exited: make(chan error, 1)}
	addrFile := filepath.Join(t.TempDir(), "addrs.json")
	s.cmd = exec.Command(bin, "--data-dir", data, "--listen", "127.0.0.1:0", "--http-listen", "", "--log-level", "warn",
		"--rift-listen", "127.0.0.1:0", "--rift-dev-certs", certs, "--addr-file", addrFile)
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(s.stop)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil {
			var a struct{ Rift string }
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("--addr-file holds %q: %v", b, err)
			}
			s.rift = a.Rift
			return s
		}
		select {
		case err := <-s.exited:
			t.Fatalf("fila-server exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("fila-server did not report its addresses within 60 s")
		}
	}
}

func (s *riftServer) stop() {
	if s.cmd.ProcessState == nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		<-s.exited
		s.cmd.ProcessState = &os.ProcessState{} // stopped: Cleanup does nothing more
	}
}

// args returns the connection flags of the rift commands for this server.
func (s *riftServer) args(args ...string) []string {
	return append([]string{"--timeout", "20s", "rift", "--rift-addr", s.rift, "--rift-ca", filepath.Join(s.certs, "ca.pem"),
		"--token-file", filepath.Join(s.certs, "dev-token")}, args...)
}

// fila runs the CLI in-process and fails the test unless it exits 0.
func (s *riftServer) fila(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut strings.Builder
	if code := runWith(t.Context(), s.args(args...), strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("fila %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// filaFails runs the CLI and returns its error line, failing the test if it exits 0.
func (s *riftServer) filaFails(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut strings.Builder
	if code := runWith(t.Context(), s.args(args...), strings.NewReader(""), &out, &errOut); code == 0 {
		t.Fatalf("fila %s succeeded: %s", strings.Join(args, " "), out.String())
	}
	return errOut.String()
}

// responder starts `fila rift reply` in the background, returns once it is listening, and
// returns a channel that receives its exit code, stdout and stderr.
type replyResult struct {
	code        int
	out, errOut string
}

func (s *riftServer) responder(t *testing.T, args ...string) <-chan replyResult {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan replyResult, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		var out strings.Builder
		var errOut strings.Builder
		code := runWith(ctx, s.args(append([]string{"reply"}, args...)...), strings.NewReader(""), &out, io.MultiWriter(&errOut, pw))
		pw.Close()
		done <- replyResult{code, out.String(), errOut.String()}
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("fila rift reply %v printed %q first (%v)", args, line, err)
	}
	go io.Copy(io.Discard, pr)
	return done
}

// The rift commands against a real server: streams created, listed, described and deleted at run
// time, kept across a restart; `fila rift reply` answering with a payload, a command's output or
// the request itself, in a queue group, up to --count.
func TestRiftCommandsAgainstAServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fila-server")
	}
	bin := filepath.Join(t.TempDir(), "fila-server")
	if err := repobuild.Build(bin, "./server/cmd/fila-server"); err != nil {
		t.Fatal(err)
	}
	data, certs := t.TempDir(), t.TempDir()
	s := startRiftServer(t, bin, data, certs)
	top := t // the restarted server lives as long as the whole test

	t.Run("streams", func(t *testing.T) {
		if out := s.fila(t, "stream", "create", "orders", "--subject", "orders.>", "--subject", "refunds.*", "--durability", "os",
			"--max-msgs", "1000", "--max-age", "24h"); out != "created stream orders\n" {
			t.Errorf("create printed %q", out)
		}
		if out := s.fila(t, "stream", "create", "orders", "--subject", "orders.>", "--subject", "refunds.*", "--durability", "os",
			"--max-msgs", "1000", "--max-age", "24h"); out != "stream orders exists with this definition\n" {
			t.Errorf("create again printed %q", out)
		}
		if msg := s.filaFails(t, "stream", "create", "orders", "--subject", "orders.>"); !strings.Contains(msg, "another definition") {
			t.Errorf("create with another definition: %q", msg)
		}
		if msg := s.filaFails(t, "stream", "create", "nosubject"); !strings.Contains(msg, "--subject") {
			t.Errorf("create without --subject: %q", msg)
		}
		s.fila(t, "stream", "pub", "orders", "orders.new", "first")

		s.stop()
		s = startRiftServer(top, bin, data, certs)
		want := "NAME     SUBJECTS             DURABILITY   MESSAGES   BYTES   CONSUMERS   DEFINED IN\n" +
			"orders   orders.> refunds.*   os           1          15      0           runtime\n"
		if out := s.fila(t, "stream", "list"); out != want {
			t.Errorf("list after a restart:\n%s\nwant:\n%s", out, want)
		}
		out := s.fila(t, "stream", "describe", "orders")
		for _, line := range []string{"stream           orders", "max msgs         1000", "max age          24h0m0s",
			"max bytes        unlimited", "messages         1", "last sequence    1"} {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("describe lacks %q:\n%s", line, out)
			}
		}
		var in struct {
			Name     string
			MaxAgeMs int64 `json:"max_age_ms"`
		}
		if err := json.Unmarshal([]byte(s.fila(t, "--json", "stream", "describe", "orders")), &in); err != nil || in.MaxAgeMs != 86_400_000 {
			t.Errorf("describe --json: %+v, %v", in, err)
		}
		if out := s.fila(t, "stream", "delete", "orders"); out != "stream orders deleted\n" {
			t.Errorf("delete printed %q", out)
		}
		if msg := s.filaFails(t, "stream", "describe", "orders"); !strings.Contains(msg, `unknown stream "orders"`) {
			t.Errorf("describe after delete: %q", msg)
		}
		if out := s.fila(t, "--json", "stream", "list"); strings.Join(strings.Fields(out), "") != `{"streams":[]}` {
			t.Errorf("list --json after delete: %q", out)
		}
	})

	t.Run("reply with a command", func(t *testing.T) {
		done := s.responder(t, "svc.upper", "--command", "tr a-z A-Z; printf ' on %s' \"$FILA_RIFT_SUBJECT\"", "--count", "2")
		for _, word := range []string{"hello", "again"} {
			out := s.fila(t, "req", "svc.upper", word)
			if want := ": " + strings.ToUpper(word) + " on svc.upper\n"; !strings.HasSuffix(out, want) {
				t.Errorf("req %s printed %q, want …%q", word, out, want)
			}
		}
		r := <-done // --count 2: it exits by itself
		if r.code != 0 || strings.Count(r.out, "svc.upper (reply _INBOX.") != 2 {
			t.Errorf("reply exited %d, printed %q, stderr %q", r.code, r.out, r.errOut)
		}
	})

	t.Run("reply with a failing command", func(t *testing.T) {
		// It answers with what it printed, nothing at all here, rather than leave the request waiting.
		done := s.responder(t, "svc.fail", "--command", "cat >/dev/null; exit 3", "--count", "1")
		if out := s.fila(t, "req", "svc.fail", "x"); !strings.HasPrefix(out, "_INBOX.") || !strings.HasSuffix(out, ": \n") {
			t.Errorf("req printed %q", out)
		}
		if r := <-done; r.code != 0 || !strings.Contains(r.errOut, "exit status 3") {
			t.Errorf("reply exited %d, stderr %q", r.code, r.errOut)
		}
		if msg := s.filaFails(t, "reply", "svc.x", "--count", "-1"); !strings.Contains(msg, "--count") {
			t.Errorf("--count -1: %q", msg)
		}
	})

	t.Run("reply in a queue group", func(t *testing.T) {
		a := s.responder(t, "svc.who", "one", "--queue", "workers", "--count", "1")
		b := s.responder(t, "svc.who", "two", "--queue", "workers", "--count", "1")
		var got []string
		for range 2 {
			out := s.fila(t, "req", "svc.who")
			got = append(got, out[strings.LastIndex(out, " ")+1:len(out)-1])
		}
		slices.Sort(got)
		if strings.Join(got, ",") != "one,two" {
			t.Errorf("answers %v: want one from each member of the group", got)
		}
		for _, r := range []replyResult{<-a, <-b} {
			if r.code != 0 {
				t.Errorf("a responder exited %d: %s", r.code, r.errOut)
			}
		}
	})

	t.Run("reply echoes", func(t *testing.T) {
		done := s.responder(t, "svc.echo", "--count", "1")
		s.fila(t, "pub", "svc.echo", "not a request") // no reply subject: skipped, not counted
		if out := s.fila(t, "req", "svc.echo", "ping"); !strings.HasSuffix(out, ": ping\n") {
			t.Errorf("req printed %q", out)
		}
		if r := <-done; r.code != 0 || !strings.Contains(r.errOut, "without a reply subject") {
			t.Errorf("reply exited %d, stderr %q", r.code, r.errOut)
		}
	})
}
