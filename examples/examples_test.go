// Package examples_test builds every example and runs it against a real fila-server with a Rift
// listener in development mode, checking what each prints.
package examples_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// boundAddrs waits for the --addr-file fila-server writes once every listener is bound (renamed
// into place whole), failing the test if the server exits first.
func boundAddrs(t *testing.T, path string, exited <-chan error) (fibp, rift string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			var a struct{ FIBP, Rift string }
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("fila-server wrote %q to its --addr-file: %v", b, err)
			}
			return a.FIBP, a.Rift
		}
		select {
		case err := <-exited:
			t.Fatalf("fila-server exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("fila-server did not report its addresses within 30 s")
		}
	}
}

func TestExamplesRunAgainstAServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server and the examples")
	}
	bin := t.TempDir()
	// Built as the image builds it (CGO_ENABLED=0 -trimpath, deploy/Dockerfile), the configuration
	// make test compiles in, so that the build reuses its cache.
	build := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "./...", "../server/cmd/fila-server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	certs, addrFile := t.TempDir(), filepath.Join(t.TempDir(), "addrs.json")
	srv := exec.Command(filepath.Join(bin, "fila-server"), "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "",
		"--log-level", "warn", "--rift-listen", "127.0.0.1:0", "--rift-dev-certs", certs, "--addr-file", addrFile)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() { srv.Process.Kill(); <-exited })
	addr, riftAddr := boundAddrs(t, addrFile, exited)

	run := func(name string, args ...string) string {
		t.Helper()
		args = append(args, "-addr", addr)
		if strings.HasPrefix(name, "rift-") {
			args = append(args[:len(args)-2], "-rift-addr", riftAddr, "-ca", filepath.Join(certs, "ca.pem"), "-token-file", filepath.Join(certs, "dev-token"))
		}
		out, err := exec.Command(filepath.Join(bin, name), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}

	out := run("producer", "-queue", "examples", "-n", "5")
	if strings.Count(out, "enqueued message ") != 5 {
		t.Errorf("producer printed:\n%s", out)
	}
	out = run("consumer", "-queue", "examples", "-n", "5")
	if strings.Count(out, "processed ") != 5 || !strings.Contains(out, ": message 4 (attempt 1)") {
		t.Errorf("consumer printed:\n%s", out)
	}
	out = run("fair-pipeline", "-noisy", "300")
	// DRR with quantum 1 and weights noisy 1, quiet-a 1, quiet-b 2: each round serves noisy once,
	// quiet-a once and quiet-b twice, so the twelve quiet jobs are done within 18 deliveries,
	// not after the 300 noisy ones enqueued before them.
	const order = "noisy quiet-a quiet-b quiet-b noisy quiet-a quiet-b quiet-b noisy quiet-a quiet-b quiet-b noisy quiet-a noisy quiet-a noisy quiet-a"
	if !strings.Contains(out, "first 18 deliveries: "+order+"\n") || !strings.Contains(out, "all 12 quiet jobs were done after 18 deliveries (of 312 queued)") {
		t.Errorf("fair-pipeline printed:\n%s", out)
	}
	out = run("rift-pubsub", "-n", "3")
	for _, want := range []string{"received greetings.lang0: hello 0", "received greetings.lang2: hello 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("rift-pubsub printed:\n%s", out)
		}
	}
	if out = run("rift-request", "-name", "Ada"); out != "reply: hello, Ada\n" {
		t.Errorf("rift-request printed %q", out)
	}
}
