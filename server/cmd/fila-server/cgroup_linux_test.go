package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/internal/fibptest"
)

// limitedCgroup makes a child of the test process's own memory cgroup (cgroup v2, or v1's memory
// controller) limited to limit bytes, and returns the cgroup.procs file that moves a process
// into it; the cgroup is removed at the end. It skips, saying why, where no such cgroup can be
// made (not root, cgroups read-only, no memory controller).
func limitedCgroup(t *testing.T, limit int64) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("cannot read /proc/self/cgroup (%v): no memory-limited cgroup to run the server in", err)
	}
	var dir, file string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) != 3:
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			dir, file = filepath.Join("/sys/fs/cgroup/memory", parts[2]), "memory.limit_in_bytes"
		case parts[0] == "0" && parts[1] == "" && dir == "":
			dir, file = filepath.Join("/sys/fs/cgroup", parts[2]), "memory.max"
		}
	}
	if dir == "" {
		t.Skip("the process is in no memory cgroup: no memory-limited cgroup to run the server in")
	}
	child := filepath.Join(dir, fmt.Sprintf("fila-test-%d", os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Skipf("cannot make a child cgroup (%v): cgroups are not writable here", err)
	}
	t.Cleanup(func() {
		for range 50 { // the killed server leaves the cgroup once the kernel has reaped it
			if err := os.Remove(child); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("cgroup %s left behind", child)
	})
	if err := os.WriteFile(filepath.Join(child, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot limit the child cgroup's memory (%v): no memory controller there", err)
	}
	procs := filepath.Join(child, "cgroup.procs")
	probe := exec.Command("sleep", "60") // can a process be moved in? (cgroup v2 refuses some moves)
	if err := probe.Start(); err != nil {
		t.Fatal(err)
	}
	moved := os.WriteFile(procs, []byte(strconv.Itoa(probe.Process.Pid)), 0o644)
	probe.Process.Kill()
	probe.Wait()
	if moved != nil {
		t.Skipf("cannot move a process into the child cgroup (%v)", moved)
	}
	return procs
}

// startInCgroup runs the server binary with args (and its own data directory, loopback FIBP, no
// HTTP, fsync off) inside the cgroup whose cgroup.procs file is procs, and returns it, its FIBP
// address and its log; it is killed at the end of the test.
func startInCgroup(t *testing.T, procs string, args ...string) (*serverProc, string, *lockedBuffer) {
	t.Helper()
	bin := buildServer(t)
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addrs.json")
	logs := &lockedBuffer{}
	// sh moves itself into the cgroup, then becomes the server: the server starts inside it.
	argv := append([]string{"-c", `echo $$ > "$0" && exec "$@"`, procs, bin, "--data-dir", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--http-listen", "", "--addr-file", addrFile, "--fsync=false"}, args...)
	cmd := exec.Command("sh", argv...)
	cmd.Env, cmd.Stderr = serverEnv(), logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); p.wait() })
	return p, waitAddrFile(t, addrFile, p).FIBP, logs
}

// cgroupPeak reads the most memory the cgroup of procs has held ("?" where it cannot say).
func cgroupPeak(procs string) string {
	for _, f := range []string{"memory.max_usage_in_bytes", "memory.peak"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(procs), f)); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return "?"
}

// holdPartialBodies connects to addr and sends size bytes of one continued Enqueue body that it
// never finishes, then a Ping, and returns once the server answered it (every chunk taken or
// refused) or closed the connection. It reports whether the connection was closed.
func holdPartialBodies(addr string, size int) (cut bool, err error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return false, err
	}
	defer nc.Close()
	fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: 1})); err != nil {
		return false, err
	}
	if _, err := fr.Next(); err != nil {
		return false, err
	}
	chunk := make([]byte, 1<<20)
	frame := wire.AppendU32(nil, uint32(fibp.HeaderSize+len(chunk)))
	frame = fibp.Header{Opcode: fibp.OpEnqueue, Flags: fibp.FlagContinuation, RequestID: 1}.AppendTo(frame)
	frame = append(frame, chunk...)
	go func() { // the server's answers (refusals) are read while the chunks go out
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := nc.Write(frame); err != nil {
				return
			}
		}
		_, _ = nc.Write(fibp.AppendFrame(nil, 0, 2, &fibp.Ping{}))
	}()
	for {
		body, err := fr.Next()
		if err != nil {
			return true, nil
		}
		if h, _, _ := fibp.ParseHeader(body); h.Opcode == fibp.OpPong && h.RequestID == 2 {
			return false, nil
		}
	}
}

// In a memory-limited cgroup the server's default memory_budget is half the cgroup's limit, so
// that clients each within max_connection_memory cannot together make it hold more than the
// cgroup allows. Before, the budget was half the root cgroup's limit or the machine's memory, and
// twelve connections of 60 MiB of partial bodies each got the server OOM-killed in 512 MiB.
func TestClientsCannotOOMTheServerInAMemoryLimitedCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	const limit = 512 << 20
	procs := limitedCgroup(t, limit)
	p, addr, logs := startInCgroup(t, procs, "--max-connection-memory", "64MiB")

	budget := regexp.MustCompile(`msg="client memory budget" bytes=(\d+) from="([^"]*)"`).FindStringSubmatch(logs.String())
	if budget == nil || budget[1] != strconv.Itoa(limit/2) {
		t.Fatalf("the default budget is not half the cgroup's %d bytes:\n%s", limit, logs.String())
	}

	const conns, each = 12, 60 << 20 // 720 MiB in all, each under its 64 MiB bound
	var wg sync.WaitGroup
	var mu sync.Mutex
	cut := 0
	for range conns {
		wg.Go(func() {
			c, err := holdPartialBodies(addr, each)
			mu.Lock()
			defer mu.Unlock()
			if c || err != nil {
				cut++
			}
		})
	}
	wg.Wait()
	c := fibptest.Dial(t, addr) // still serving
	c.Handshake()
	if res, ok := c.Call(1, &fibp.ListQueues{}).(*fibp.ListQueuesResult); !ok || res.ErrorCode != fibp.CodeOk {
		t.Fatalf("after the attack, ListQueues answered %#v", res)
	}
	select {
	case <-p.done:
		t.Fatalf("the server died (%v) while %d connections sent %d MiB each; in a cgroup of %d MiB:\n%s",
			p.err, conns, each>>20, limit>>20, logs.String())
	default:
	}
	peak := cgroupPeak(procs)
	t.Logf("%d of %d connections were cut or refused; budget %s bytes (%s); the cgroup's peak %s bytes of %d",
		cut, conns, budget[1], budget[2], peak, limit)
}
