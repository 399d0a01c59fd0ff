// Package examples_test builds every example and runs it against a real fila-server with a Rift
// listener in development mode, checking what each prints.
package examples_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T, network string) string {
	t.Helper()
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestExamplesRunAgainstAServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server and the examples")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./...", "../server/cmd/fila-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr, riftAddr, certs := freeAddr(t, "tcp"), freeAddr(t, "udp"), t.TempDir()
	srv := exec.Command(filepath.Join(bin, "fila-server"), "--data-dir", t.TempDir(), "--listen", addr, "--http-listen", "",
		"--log-level", "warn", "--rift-listen", riftAddr, "--rift-dev-certs", certs)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })

	run := func(name string, args ...string) string {
		t.Helper()
		args = append(args, "-addr", addr)
		if strings.HasPrefix(name, "rift-") {
			args = append(args[:len(args)-2], "-rift-addr", riftAddr, "-ca", filepath.Join(certs, "ca.pem"), "-token-file", filepath.Join(certs, "dev-token"))
		}
		var out []byte
		var err error
		// The listeners come up just after the process starts: retry a failed first run briefly.
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if out, err = exec.Command(filepath.Join(bin, name), args...).CombinedOutput(); err == nil || time.Now().After(deadline) {
				break
			}
		}
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
