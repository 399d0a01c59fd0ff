package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/filamq/fila/tools/internal/loopback"
)

// Node is one fila-server process of a Cluster. It keeps its data directory and its FIBP
// address across restarts, so that a restarted node is the same node to its clients.
type Node struct {
	ID      int
	DataDir string
	Addr    string   // FIBP listener on loopback, fixed at the first start
	Args    []string // further flags (the cluster's, --fsync=false, ...), after the runner's own
	Log     *logBuffer

	bin    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
	paused bool
}

// Cluster is a set of fila-server processes on loopback.
type Cluster struct {
	Nodes []*Node
}

// StartWait bounds how long a node may take to accept connections after it was started.
var StartWait = 60 * time.Second

// StartCluster starts n nodes of bin, node i (from 1) in dir/node<i> with args(i) as its
// further flags (args may be nil), all at once (a cluster's node serves once the others are up),
// and waits until each accepts connections.
func StartCluster(bin, dir string, n int, args func(id int) []string) (*Cluster, error) {
	c := &Cluster{}
	for id := 1; id <= n; id++ {
		addr, err := loopback.FreeAddr()
		if err != nil {
			return nil, err
		}
		node := &Node{ID: id, DataDir: filepath.Join(dir, fmt.Sprintf("node%d", id)), Addr: addr, Log: &logBuffer{}, bin: bin}
		if args != nil {
			node.Args = args(id)
		}
		c.Nodes = append(c.Nodes, node)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, node := range c.Nodes {
		wg.Go(func() { errs[i] = node.Start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// FoundingFlags returns the cluster flags of n founding members on loopback, for StartCluster's
// args: --node-id, --cluster-listen on a port free a moment ago, and the same --initial-cluster
// on each. A node restarted keeps its flags (they are read only while its data directory is
// empty).
func FoundingFlags(n int) (func(id int) []string, error) {
	listen := make([]string, n+1)
	var founders []string
	for id := 1; id <= n; id++ {
		addr, err := loopback.FreeAddr()
		if err != nil {
			return nil, err
		}
		listen[id] = addr
		founders = append(founders, fmt.Sprintf("%d=%s", id, addr))
	}
	initial := strings.Join(founders, ",")
	return func(id int) []string {
		return []string{"--node-id", fmt.Sprint(id), "--cluster-listen", listen[id], "--initial-cluster", initial}
	}, nil
}

// Addrs are the nodes' FIBP addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// Stop kills every node still running (resuming a paused one first).
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// Start starts the node (again) and waits until it accepts connections; a node that exits
// meanwhile is an error carrying the tail of its log.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("node %d is already running", n.ID)
	}
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		return err
	}
	args := append([]string{"--data-dir", n.DataDir, "--listen", n.Addr, "--http-listen", "", "--log-level", "warn"}, n.Args...)
	cmd := exec.Command(n.bin, args...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = n.Log, n.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the runner
	fmt.Fprintf(n.Log, "--- chaos: starting node %d\n", n.ID)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(StartWait)
	for {
		if c, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
			c.Close()
			n.cmd, n.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("node %d exited during start-up (%v):\n%s", n.ID, cmd.ProcessState, n.Log.tail(20))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("node %d did not accept connections within %v:\n%s", n.ID, StartWait, n.Log.tail(20))
		}
	}
}

// Running reports whether the node's process is running (paused included).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Kill sends SIGKILL (kill -9) and waits until the process is gone. Killing a stopped node
// does nothing.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	fmt.Fprintf(n.Log, "--- chaos: kill -9 node %d\n", n.ID)
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.cmd, n.exited, n.paused = nil, nil, false
}

// Pause stops the process with SIGSTOP; Resume continues it with SIGCONT.
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process.
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT, false) }

func (n *Node) signal(sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("node %d is not running", n.ID)
	}
	select {
	case <-n.exited:
		return fmt.Errorf("node %d exited by itself (%v):\n%s", n.ID, n.cmd.ProcessState, n.Log.tail(20))
	default:
	}
	n.paused = paused
	return n.cmd.Process.Signal(sig)
}

// CheckAlive reports a node that exited without being killed.
func (c *Cluster) CheckAlive() error {
	var errs []error
	for _, n := range c.Nodes {
		n.mu.Lock()
		if n.cmd != nil {
			select {
			case <-n.exited:
				errs = append(errs, fmt.Errorf("node %d exited by itself (%v):\n%s", n.ID, n.cmd.ProcessState, n.Log.tail(20)))
			default:
			}
		}
		n.mu.Unlock()
	}
	return errors.Join(errs...)
}

// cleanEnv is the environment without FILA_* variables, so that the servers take no settings
// from the runner's.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FILA_") {
			env = append(env, kv)
		}
	}
	return env
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

// tail is the last n lines.
func (b *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
