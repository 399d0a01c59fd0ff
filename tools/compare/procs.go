package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is a broker process started by this tool. It runs in its own process group so that
// stopping it also stops anything it spawned, and so that Ctrl-C in the terminal reaches only the
// tool, which then stops every proc itself.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// running holds every proc not yet stopped; stopAll empties it.
var running = struct {
	sync.Mutex
	set map[*proc]struct{}
}{set: map[*proc]struct{}{}}

// startProc starts bin with args, its output going to logPath.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig kills the broker even when the tool itself is killed with SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	running.Lock()
	defer running.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	running.set[p] = struct{}{}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after a grace period.
func (p *proc) stop() {
	running.Lock()
	delete(running.set, p)
	running.Unlock()
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	syscall.Kill(-pgid, syscall.SIGKILL) // anything left in the group
}

// logTail returns the last lines of the process's output, for error messages.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// stopAll stops every process still running; safe to call more than once.
func stopAll() {
	running.Lock()
	ps := make([]*proc, 0, len(running.set))
	for p := range running.set {
		ps = append(ps, p)
	}
	running.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// runTool runs a build command (go build, go install) in its own process group, killed as a
// whole when ctx ends.
func runTool(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, bytes.TrimSpace(out))
	}
	return nil
}

// waitReady calls ready until it succeeds, the process exits or the timeout passes.
func waitReady(ctx context.Context, p *proc, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited during start-up:\n%s", p.name, p.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %w\n%s", p.name, timeout, err, p.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// installNATS installs nats-server at natsServerVersion under cache, unless it is there already.
func installNATS(ctx context.Context, cache string) (string, error) {
	dir := filepath.Join(cache, "nats-server-"+natsServerVersion)
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// GOWORK=off and a neutral directory: the install must not see this repository's workspace.
	env := []string{"GOBIN=" + dir, "GOWORK=off", "GOFLAGS="}
	if err := runTool(ctx, dir, env, "go", "install", "github.com/nats-io/nats-server/v2@"+natsServerVersion); err != nil {
		return "", fmt.Errorf("installing nats-server: %w", err)
	}
	return bin, nil
}
