package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/repobuild"
)

// filaOK runs the CLI in-process and fails the test unless it exits 0; it returns stdout.
func filaOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut strings.Builder
	if code := runWith(t.Context(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("fila %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// filaFailsWith runs the CLI, which must exit with code, and returns its stderr.
func filaFailsWith(t *testing.T, code int, args ...string) string {
	t.Helper()
	var out, errOut strings.Builder
	if got := runWith(t.Context(), args, strings.NewReader(""), &out, &errOut); got != code {
		t.Fatalf("fila %s: exit %d, want %d: %s%s", strings.Join(args, " "), got, code, out.String(), errOut.String())
	}
	return errOut.String()
}

// startAuthServer runs a real fila-server with authentication on (key is the bootstrap key)
// and returns its FIBP and HTTP addresses.
func startAuthServer(t *testing.T, key string) (fibpAddr, httpAddr string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fila-server")
	if err := repobuild.Build(bin, "./server/cmd/fila-server"); err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(t.TempDir(), "addrs.json")
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--log-level", "warn", "--addr-file", addrFile)
	cmd.Env = append(os.Environ(), "FILA_BOOTSTRAP_API_KEY="+key)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); <-exited })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil {
			var a struct{ FIBP, HTTP string }
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("--addr-file holds %q: %v", b, err)
			}
			return a.FIBP, a.HTTP
		}
		select {
		case err := <-exited:
			t.Fatalf("fila-server exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("fila-server did not report its addresses within 60 s")
		}
	}
}

// fila queue peek, fila message get and delete, fila queue purge against a real broker: peeking
// leaves the messages as they were (the consume that follows gets attempt 1), the dead-letter
// queue is peeked with --dlq, purge needs --force, refusals are one line with the broker's reason.
func TestPeekGetDeleteAndPurgeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fila-server")
	}
	const key = "bootstrap-key-of-the-messages-cli-test-0123456789"
	fibpAddr, httpAddr := startAuthServer(t, key)
	conn := []string{"--addr", fibpAddr, "--api-key", key, "--timeout", "20s"}
	fila := func(args ...string) string { t.Helper(); return filaOK(t, append(conn, args...)...) }
	web := "--http-addr=" + httpAddr

	fila("queue", "create", "orders", "--max-attempts", "1")
	for _, p := range []string{"first order", "second order", "third order"} {
		fila("enqueue", "orders", p, "--fairness-key", "tenant-a", "-H", "source=web")
	}
	out := fila("queue", "peek", "orders", web, "--count", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "ready") ||
		!strings.Contains(lines[1], "first order") || !strings.Contains(lines[2], "second order") ||
		!strings.HasPrefix(lines[3], "more: fila queue peek orders --after ") {
		t.Fatalf("peek --count 2 printed:\n%s", out)
	}
	var page peekPage
	if err := json.Unmarshal([]byte(fila("--json", "queue", "peek", "orders", web, "--all", "--count", "1")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 3 || page.Messages[2].Preview != "third order" || page.Messages[0].Attempts != 0 ||
		page.Messages[0].Headers["source"] != "web" {
		t.Fatalf("peek --all --json: %+v", page)
	}
	first, second := page.Messages[0].ID, page.Messages[1].ID

	// The peeks counted no attempt and took no lease: the first consume gets attempt 1.
	var d struct {
		ID           string `json:"id"`
		AttemptCount uint32 `json:"attempt_count"`
	}
	if err := json.Unmarshal([]byte(fila("--json", "consume", "orders", "--count", "1")), &d); err != nil {
		t.Fatal(err)
	}
	if d.ID != first || d.AttemptCount != 1 {
		t.Fatalf("the first delivery after peeks: %+v, want %s at attempt 1", d, first)
	}
	fila("nack", "orders", first, "--error", "card declined")
	if out := fila("queue", "peek", "orders", "--dlq", web); !strings.Contains(out, first) || !strings.Contains(out, "first order") {
		t.Fatalf("peek --dlq printed:\n%s", out)
	}
	if out := fila("message", "get", "orders", first, "--dlq", web); !strings.Contains(out, "last error") ||
		!strings.Contains(out, "card declined") || !strings.Contains(out, "header source") || !strings.HasSuffix(out, "\nfirst order\n") {
		t.Fatalf("message get --dlq printed:\n%s", out)
	}

	if out := fila("message", "delete", "orders", second, web); out != "deleted message "+second+" from orders\n" {
		t.Fatalf("message delete printed %q", out)
	}
	if msg := filaFailsWith(t, 1, append(conn, "message", "get", "orders", second, web)...); !strings.Contains(msg, "MessageNotFound") ||
		strings.Count(msg, "\n") != 1 {
		t.Fatalf("get of a deleted message: %q", msg)
	}
	if msg := filaFailsWith(t, 2, append(conn, "queue", "purge", "orders", web)...); !strings.Contains(msg, "--force") {
		t.Fatalf("purge without --force: %q", msg)
	}
	if out := fila("queue", "purge", "orders", "--force", web); out != "purged 1 messages from orders\n" {
		t.Fatalf("purge printed %q", out)
	}
	if out := fila("queue", "peek", "orders", web); out != "queue orders holds no messages\n" {
		t.Fatalf("peek after the purge printed %q", out)
	}
	if msg := filaFailsWith(t, 1, "--addr", fibpAddr, "queue", "peek", "orders", web); !strings.Contains(msg, "requires an API key") ||
		!strings.Contains(msg, "--api-key") {
		t.Fatalf("peek without a key: %q", msg)
	}
}

// The commands send what the admin API expects: the paths with the queue escaped, the bearer,
// the JSON content type; --count is checked before anything is sent.
func TestMessageCommandsRequests(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Content-Type"))
		switch {
		case strings.HasSuffix(r.URL.Path, "/purge"):
			json.NewEncoder(w).Encode(map[string]any{"queue": "a b", "purged": 3})
		case r.Method == http.MethodDelete:
			json.NewEncoder(w).Encode(map[string]any{"queue": "a b", "deleted": "x"})
		default:
			json.NewEncoder(w).Encode(peekPage{Queue: "a b"})
		}
	}))
	defer srv.Close()
	addr := "--http-addr=" + strings.TrimPrefix(srv.URL, "http://")
	filaOK(t, "--api-key", "k", "queue", "peek", "a b", addr, "--dlq", "--count", "5", "--after", "0190a8e4-0000-7000-8000-000000000001")
	filaOK(t, "--api-key", "k", "message", "delete", "a b", "0190a8e4-0000-7000-8000-000000000001", addr)
	filaOK(t, "--api-key", "k", "queue", "purge", "a b", "--force", addr)
	want := []string{
		"GET /api/v1/queues/a%20b.dlq/messages?after=0190a8e4-0000-7000-8000-000000000001&count=5 Bearer k application/json",
		"DELETE /api/v1/queues/a%20b/messages/0190a8e4-0000-7000-8000-000000000001? Bearer k application/json",
		"POST /api/v1/queues/a%20b/purge? Bearer k application/json",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, count := range []string{"0", "1001"} {
		if msg := filaFailsWith(t, 2, "queue", "peek", "q", addr, "--count", count); !strings.Contains(msg, "want 1 to 1000") {
			t.Fatalf("--count %s: %q", count, msg)
		}
	}
	if len(got) != 3 {
		t.Fatalf("a bad --count sent a request: %v", got[3:])
	}
}
