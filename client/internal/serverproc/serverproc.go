// Package serverproc runs fila-server as a subprocess for the client module's tests: the module
// may not import the server, so its tests against a real broker build it (repobuild) and run it.
// A Process is started on a loopback address (port 0: the server reports the one it bound in its
// --addr-file), its output is kept for the test's log, and it is stopped with SIGTERM or killed.
// On Linux the kernel kills it when the test process dies without stopping it.
package serverproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Addrs is what fila-server writes to its --addr-file once every listener is bound.
type Addrs struct {
	FIBP string `json:"fibp"`
	Rift string `json:"rift"`
	HTTP string `json:"http"`
}

// Process is one fila-server subprocess.
type Process struct {
	cmd     *exec.Cmd
	Log     *LockedBuffer // its standard output and error
	exited  chan struct{}
	waitErr error // set before exited is closed
}

// Start runs bin with --data-dir dataDir, --listen addr, no HTTP listener, warn-level logs and the
// extra args (later flags win), in an environment without FILA_* variables, and waits until it
// has written its addresses: a server that cannot bind a listener exits instead, and that is
// reported with its log. wait bounds the wait (a safety net against a hang).
func Start(bin, dataDir, addr string, wait time.Duration, args ...string) (*Process, Addrs, error) {
	addrDir, err := os.MkdirTemp("", "fila-addr-")
	if err != nil {
		return nil, Addrs{}, err
	}
	defer os.RemoveAll(addrDir)
	addrFile := filepath.Join(addrDir, "addrs.json")
	p := &Process{Log: &LockedBuffer{}, exited: make(chan struct{})}
	args = append([]string{"--data-dir", dataDir, "--listen", addr, "--http-listen", "", "--log-level", "warn", "--addr-file", addrFile}, args...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = CleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.Log, p.Log
	dieWithTests(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, Addrs{}, err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(wait)
	for {
		if b, err := os.ReadFile(addrFile); err == nil { // written whole (renamed into place)
			var a Addrs
			if err := json.Unmarshal(b, &a); err != nil {
				p.Kill()
				return nil, Addrs{}, fmt.Errorf("fila-server wrote %q to its --addr-file: %v", b, err)
			}
			return p, a, nil
		}
		select {
		case <-p.exited:
			return nil, Addrs{}, fmt.Errorf("fila-server exited before it was ready (%v):\n%s", p.waitErr, p.Log.String())
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, Addrs{}, fmt.Errorf("fila-server was not ready within %v:\n%s", wait, p.Log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the process and waits for it to exit.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// Stop sends SIGTERM and waits up to wait for the process, then kills it; it reports an unclean
// exit, or a process that had already exited.
func (p *Process) Stop(wait time.Duration) error {
	if !p.Running() {
		return fmt.Errorf("fila-server had already exited: %v", p.waitErr)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("fila-server exited with %v", p.waitErr)
		}
		return nil
	case <-time.After(wait):
		p.Kill()
		return errors.New("fila-server did not stop within " + wait.String() + " of SIGTERM; killed")
	}
}

// CleanEnv is the environment without FILA_* variables, so that a subprocess (the server, the
// CLI) picks up no settings from the caller's environment.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FILA_") {
			env = append(env, kv)
		}
	}
	return env
}

// LockedBuffer is a bytes.Buffer safe for a subprocess's writes and the test's reads at once.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
