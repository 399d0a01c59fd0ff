package console

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/tools/internal/loopback"
	"github.com/filamq/fila/tools/internal/repo"
)

// server is one running fila-server with authentication on.
type server struct {
	addr, httpAddr string
	logs           *logBuffer
	cmd            *exec.Cmd
}

// startServer builds fila-server and starts it on a fresh data directory with apiKey as its
// bootstrap key (none: authentication off), waiting until /readyz says ready. It stops with the
// test.
func startServer(t *testing.T, apiKey string, extra ...string) *server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := repo.BuildServer(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &server{logs: &logBuffer{}}
	if s.addr, err = loopback.FreeAddr(); err == nil {
		s.httpAddr, err = loopback.FreeAddr()
	}
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--data-dir", t.TempDir(), "--listen", s.addr, "--http-listen", s.httpAddr}, extra...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = os.Environ()
	if apiKey != "" {
		s.cmd.Env = append(s.cmd.Env, "FILA_BOOTSTRAP_API_KEY="+apiKey)
	}
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { s.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("fila-server's log:\n%s", s.logs)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := http.Get("http://" + s.httpAddr + "/readyz"); err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
			_ = body
		}
		select {
		case <-exited:
			t.Fatalf("fila-server exited during start-up (%v); its log:\n%s", s.cmd.ProcessState, s.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("fila-server was not ready within 30s; its log:\n%s", s.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// api calls the admin API with the bootstrap key and decodes nothing: it answers the status
// and body.
func (s *server) api(t *testing.T, key, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.httpAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	if lines := strings.Split(s, "\n"); len(lines) > 60 {
		s = fmt.Sprintf("(%d lines before)\n", len(lines)-60) + strings.Join(lines[len(lines)-60:], "\n")
	}
	return s
}
