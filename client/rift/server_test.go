package rift_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/repobuild"
	"github.com/filamq/fila/client/rift"
)

// The client module never imports server packages: TestMain builds server/cmd/fila-server with
// the go command (from the directory holding go.work) and the tests run it as a subprocess with
// development certificates on a loopback UDP port.

var serverBin string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "rift-client-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if serverBin = os.Getenv("RIFT_TEST_SERVER_BIN"); serverBin != "" { // a prebuilt server, e.g. to compare versions
		return m.Run()
	}
	serverBin = filepath.Join(tmp, "fila-server")
	if err := repobuild.Build(serverBin, "./server/cmd/fila-server"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

const config = `
rift:
  identities:
    - {name: admin, token: admin-token, publish: [">"], subscribe: [">"], control: true}
    - {name: game, token: game-token, publish: ["game.>", "svc.>"], subscribe: ["game.*", "_INBOX.game.>"]}
    - {name: svc, token: svc-token, publish: ["_INBOX.>"], subscribe: ["svc.>"]}
  streams:
    - {name: events, subjects: ["events.>"], durability: fsync}
`

// server is a fila-server subprocess with Rift enabled.
type server struct {
	addr, ca string
	cmd      *exec.Cmd
	log      *bytes.Buffer
}

func startServer(t testing.TB) *server {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fila.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &server{addr: freeUDP(t), ca: filepath.Join(dir, "certs", "ca.pem"), log: &bytes.Buffer{}}
	s.cmd = exec.Command(serverBin, "--config", cfgPath, "--data-dir", filepath.Join(dir, "data"), "--listen", freeTCP(t),
		"--http-listen", "", "--log-level", "warn", "--rift-listen", s.addr, "--rift-dev-certs", filepath.Join(dir, "certs"))
	s.cmd.Stderr = &lockedWriter{w: s.log}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
		if t.Failed() {
			t.Logf("fila-server log:\n%s", s.log)
		}
	})
	// Wait until the listener answers (a safety net, not an assertion).
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := s.connect(t.Context(), "admin-token")
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("fila-server did not start: %v\n%s", err, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) connect(ctx context.Context, token string) (*rift.Client, error) {
	tc, err := rift.TLSConfig(s.ca)
	if err != nil {
		return nil, err
	}
	return rift.Connect(ctx, s.addr, "localhost", tc, token)
}

func (s *server) client(t testing.TB, token string) *rift.Client {
	t.Helper()
	c, err := s.connect(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func freeUDP(t testing.TB) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().String()
}

func freeTCP(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
