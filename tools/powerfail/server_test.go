package powerfail

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/tools/internal/loopback"
	"github.com/filamq/fila/tools/internal/repo"
)

var (
	buildOnce sync.Once
	buildDir  string
	builtBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// serverBinary builds fila-server from the repository holding this package, once per test
// binary.
func serverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "fila-powerfail-"); buildErr != nil {
			return
		}
		builtBin, buildErr = repo.BuildServer(context.Background(), buildDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// orphanKilled makes a server die with the test binary (a test that times out runs no cleanup;
// its server would go on, on a mount nobody serves any more).
var orphanKilled = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

// server is one running fila-server process.
type server struct {
	cmd    *exec.Cmd
	addr   string
	logs   *logBuffer
	exited chan struct{} // closed once the process has been reaped
}

// startServer starts fila-server on dataDir with fresh loopback ports and waits until it
// accepts connections.
func startServer(bin, dataDir string, fsync bool) (*server, error) {
	addr, err := loopback.FreeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := loopback.FreeAddr()
	if err != nil {
		return nil, err
	}
	s := &server{addr: addr, logs: &logBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "--data-dir", dataDir, "--listen", addr, "--http-listen", httpAddr,
		"--fsync="+strconv.FormatBool(fsync))
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	s.cmd.SysProcAttr = orphanKilled
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("fila-server exited during start-up (%v); its log:\n%s", s.cmd.ProcessState, s.logs)
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("fila-server did not listen within 20s; its log:\n%s", s.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// crashDuringStart starts fila-server on dataDir and kills it with SIGKILL after 'after', most
// likely inside its start-up (Pebble's Open, the WAL replay and flush, the queues' replay).
func crashDuringStart(bin, dataDir string, fsync bool, after time.Duration) error {
	s := &server{logs: &logBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http-listen", "",
		"--fsync="+strconv.FormatBool(fsync))
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	s.cmd.SysProcAttr = orphanKilled
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	select {
	case <-time.After(after):
		s.kill()
		return nil
	case <-s.exited:
		return fmt.Errorf("fila-server exited during start-up (%v); its log:\n%s", s.cmd.ProcessState, s.logs)
	}
}

// kill ends the process with SIGKILL and waits until it is gone: once kill returns, no request
// of the process is still in flight on the file system.
func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop asks the process to exit with SIGTERM, killing it after 10 s.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.kill()
	}
}

// logBuffer collects a process's output; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail is the last n lines of the log.
func (b *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
