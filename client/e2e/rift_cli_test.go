package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/serverproc"
)

// riftServer starts a private broker with a Rift listener in development mode (generated CA,
// dev identity) and one memory stream, and returns the CLI flags that reach it.
func riftServer(t *testing.T) []string {
	t.Helper()
	certs := t.TempDir()
	conf := writeFile(t, "fila.yaml", fmt.Sprintf(
		"rift:\n  listen: %s\n  dev_certs: %s\n  streams:\n    - {name: orders, subjects: [\"orders.>\"], durability: memory}\n",
		anyPort, certs))
	// Ready means the Rift listener is bound (where the server says) and the development CA and
	// token are written.
	s := privateServer(t, "--config", conf)
	return []string{"--rift-addr", s.riftAddr, "--rift-ca", filepath.Join(certs, "ca.pem"), "--token-file", filepath.Join(certs, "dev-token")}
}

func riftCLI(t *testing.T, flags []string, args ...string) cliResult {
	t.Helper()
	return cli(t, "", append(append([]string{"rift"}, flags...), args...)...)
}

func riftCLIOK(t *testing.T, flags []string, args ...string) string {
	t.Helper()
	r := riftCLI(t, flags, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("fila rift %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func TestCLIRiftPubSubRequestAndStreams(t *testing.T) {
	t.Parallel()
	flags := riftServer(t)

	// sub prints what pub publishes. Publications before the subscription exists reach nobody,
	// so pub repeats until sub has printed its two messages and exited.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := exec.CommandContext(ctx, cliBin, append(append([]string{"--timeout", "10s", "rift"}, flags...), "sub", "greet.>", "--count", "2")...)
	sub.Env = serverproc.CleanEnv()
	var subOut, subErr bytes.Buffer
	sub.Stdout, sub.Stderr = &subOut, &subErr
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sub.Wait() }()
publish:
	for {
		riftCLIOK(t, flags, "pub", "greet.world", "hello")
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("fila rift sub: %v\n%s", err, subErr.String())
			}
			break publish
		case <-time.After(100 * time.Millisecond):
		}
	}
	if out := subOut.String(); out != "greet.world: hello\ngreet.world: hello\n" {
		t.Fatalf("fila rift sub printed %q", out)
	}

	// req: the server's status service answers; nobody answers anything else.
	var status struct {
		Connections int `json:"connections"`
		Streams     []struct {
			Name string `json:"name"`
		} `json:"streams"`
	}
	out := riftCLIOK(t, flags, "--json", "req", "rift.control.status")
	var reply struct {
		Subject, Payload string
	}
	if err := json.Unmarshal([]byte(out), &reply); err != nil || !strings.HasPrefix(reply.Subject, "_INBOX.") {
		t.Fatalf("req --json printed %q (%v)", out, err)
	}
	if err := json.Unmarshal([]byte(reply.Payload), &status); err != nil || status.Connections < 1 ||
		len(status.Streams) != 1 || status.Streams[0].Name != "orders" {
		t.Fatalf("status reply %q: %+v %v", reply.Payload, status, err)
	}
	wantCLIError(t, riftCLI(t, flags, "req", "nobody.home", "ping", "--wait", "200ms"), 1, "no responders")

	// stream pub stores; fetch --ack prints and acknowledges, so a second fetch has nothing.
	if out := riftCLIOK(t, flags, "stream", "pub", "orders", "orders.1", "first"); out != "stored orders #1\n" {
		t.Fatalf("stream pub printed %q", out)
	}
	if out := riftCLIOK(t, flags, "stream", "pub", "orders", "orders.2", "second"); out != "stored orders #2\n" {
		t.Fatalf("stream pub printed %q", out)
	}
	out = riftCLIOK(t, flags, "stream", "fetch", "orders", "billing", "--ack")
	if out != "#1 (delivery 1) orders.1: first\n#2 (delivery 1) orders.2: second\n" {
		t.Fatalf("stream fetch printed %q", out)
	}
	if out := riftCLIOK(t, flags, "stream", "fetch", "orders", "billing"); out != "" {
		t.Fatalf("a second fetch after acking printed %q", out)
	}
	if out := riftCLIOK(t, flags, "--json", "stream", "fetch", "orders", "audit", "--limit", "1"); !strings.Contains(out, `"sequence": 1,`) {
		t.Fatalf("stream fetch --json printed %q", out)
	}
}

func TestCLIRiftErrors(t *testing.T) {
	t.Parallel()
	flags := riftServer(t)
	noCA := []string{flags[0], flags[1], flags[4], flags[5]} // --rift-addr and --token-file only
	wantCLIError(t, riftCLI(t, noCA, "pub", "a", "b"), 2, "--rift-ca is required")
	badToken := writeFile(t, "bad-token", "not-the-token\n")
	wantCLIError(t, riftCLI(t, append(flags[:4:4], "--token-file", badToken), "pub", "a", "b"), 1,
		"the server refused the connection: authentication failed")
	wantCLIError(t, riftCLI(t, flags, "pub", "bad subject", "x"), 1, `subject "bad subject"`)
	wantCLIError(t, riftCLI(t, flags, "stream", "pub", "nosuch", "orders.1", "x"), 1, "nosuch")
	wantCLIError(t, riftCLI(t, flags, "sub"), 2, "PATTERN")
}
