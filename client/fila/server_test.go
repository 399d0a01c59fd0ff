package fila_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/repobuild"
)

// brokerAddr is the address of the broker the Examples talk to: TestMain starts a fila-server
// and puts its address here.
var brokerAddr = "127.0.0.1:5555"

// serverBin is the fila-server TestMain built, for the tests that start brokers of their own.
var serverBin string

// serverWait bounds the wait for a broker to get ready or to stop; a safety net, never asserted.
const serverWait = 30 * time.Second

// TestMain builds fila-server and starts the broker of the Examples (this module may not import
// the server, so the SDK's tests against a real broker run it as a subprocess).
func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "fila-sdk-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	serverBin = filepath.Join(tmp, "fila-server")
	if err := repobuild.Build(serverBin, "./server/cmd/fila-server"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err := startBroker(filepath.Join(tmp, "data"), "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the Examples' fila-server:", err)
		return 1
	}
	brokerAddr = srv.addr
	code := m.Run()
	if err := srv.stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- fila-server log:\n%s", srv.log.String())
	}
	return code
}

// broker is one fila-server subprocess.
type broker struct {
	addr    string
	cmd     *exec.Cmd
	log     *lockedBuffer
	exited  chan struct{}
	waitErr error // set before exited is closed
}

// startBroker runs fila-server on dataDir listening on addr and returns once it is ready (it
// writes its --addr-file once every listener is bound).
func startBroker(dataDir, addr string) (*broker, error) {
	addrFile := filepath.Join(dataDir+"-addr", "addrs.json")
	if err := os.MkdirAll(filepath.Dir(addrFile), 0o755); err != nil {
		return nil, err
	}
	b := &broker{log: &lockedBuffer{}, exited: make(chan struct{})}
	b.cmd = exec.Command(serverBin, "--data-dir", dataDir, "--listen", addr, "--http-listen", "",
		"--log-level", "warn", "--addr-file", addrFile)
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	dieWithTests(b.cmd)
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()
	for deadline := time.Now().Add(serverWait); ; time.Sleep(10 * time.Millisecond) {
		if raw, err := os.ReadFile(addrFile); err == nil { // renamed into place whole
			var a struct{ FIBP string }
			if err := json.Unmarshal(raw, &a); err != nil {
				b.kill()
				return nil, fmt.Errorf("fila-server wrote %q to its --addr-file: %v", raw, err)
			}
			b.addr = a.FIBP
			return b, nil
		}
		select {
		case <-b.exited:
			return nil, fmt.Errorf("fila-server exited before it was ready (%v):\n%s", b.waitErr, b.log.String())
		default:
		}
		if time.Now().After(deadline) {
			b.kill()
			return nil, fmt.Errorf("fila-server was not ready within %v:\n%s", serverWait, b.log.String())
		}
	}
}

func (b *broker) kill() {
	b.cmd.Process.Kill()
	<-b.exited
}

// stop sends SIGTERM and waits for the process; it reports an unclean exit.
func (b *broker) stop() error {
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
		if b.waitErr != nil {
			return fmt.Errorf("fila-server exited with %v", b.waitErr)
		}
		return nil
	case <-time.After(serverWait):
		b.kill()
		return errors.New("fila-server did not stop within 30 s of SIGTERM; killed")
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
