package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// procCPU is a process's user and system CPU time, from /proc (0 when unreadable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from the third on
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // clock ticks of 10 ms
}

// procRSS is a process's resident set, in bytes, from /proc (0 when unreadable).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestMeasureClusterIdleQueues (FILA_MEASURE_CLUSTER_QUEUES=N only) measures N idle queues
// replicated on three real nodes on loopback, default settings (queue_idle_timeout 10 s,
// cluster_heartbeat_timeout 1 s): once every replica sleeps, the bytes and frames each node sends
// over the inter-node link per second, its CPU and RSS; then the three are killed (kill -9) and
// started again: how long until each is ready and until a queue (idle-0, then two at random)
// takes an enqueue. FILA_TEST_NODE_LOGS=DIR keeps each node's log in DIR/node-N.log and
// FILA_MEASURE_LOG_LEVEL=info adds each start's "recovered" line (queues, asleep, took).
func TestMeasureClusterIdleQueues(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_CLUSTER_QUEUES"))
	if n == 0 {
		t.Skip("FILA_MEASURE_CLUSTER_QUEUES=N measures N idle queues on three nodes")
	}
	bin := buildServer(t)
	flags := []string{"--http-listen", "127.0.0.1:0", "--max-queues", strconv.Itoa(n + 10)}
	if l := os.Getenv("FILA_MEASURE_LOG_LEVEL"); l != "" {
		flags = append(flags, "--log-level", l)
	}
	nodes, addrs := formCluster(t, bin, flags...)
	start := time.Now()
	var wg sync.WaitGroup
	var made atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			c := fibptest.Dial(t, nodes[w%3].addrs.FIBP)
			c.Handshake()
			defer c.NC.Close()
			reqID := uint32(0)
			for i := w; i < n; i += 8 {
				for {
					reqID++
					var code fibp.ErrorCode
					switch r := c.Call(reqID, &fibp.CreateQueue{Name: fmt.Sprintf("idle-%d", i)}).(type) {
					case *fibp.CreateQueueResult:
						code = r.ErrorCode
					case *fibp.Error:
						code = r.ErrorCode
					}
					if code == fibp.CodeOk || code == fibp.CodeQueueAlreadyExists {
						break // (already: an attempt answered otherwise committed after all)
					}
					if code != fibp.CodeNotLeader && code != fibp.CodeNodeNotReady && code != fibp.CodeChannelFull && code != fibp.CodeStorageError {
						t.Errorf("create idle-%d: %v", i, code)
						return
					}
					// The meta group elects a leader, or the new group's local replica failed to
					// open while it elected (StorageError, "leadership lost while committing").
					time.Sleep(50 * time.Millisecond)
				}
				if m := made.Add(1); m%1000 == 0 {
					t.Logf("created %d queues in %v", m, time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("created %d queues in %v (%.0f/s)", n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
	asleep := time.Now()
	deadline := time.Now().Add(10 * time.Minute) // a measurement's safety net
	for {
		awake := 0.0
		for _, nd := range nodes {
			awake += nodeMetric(nd, "fila_queue_groups_awake")
		}
		if awake == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v replicas still awake after 10 minutes", awake)
		}
		if os.Getenv("FILA_MEASURE_VERBOSE") != "" {
			t.Logf("%v replicas awake", awake)
		}
		// A scrape of /metrics does not count as activity (broker/quietreads.go): it keeps no
		// group awake.
		time.Sleep(2 * time.Second)
	}
	t.Logf("every replica asleep %v after the last creation", time.Since(asleep).Round(time.Second))
	const window = 10 * time.Second
	type sample struct {
		bytes, frames float64
		cpu           time.Duration
	}
	take := func(nd *clusterProc) sample {
		return sample{nodeMetric(nd, "fila_cluster_link_bytes_sent_total"), nodeMetric(nd, "fila_cluster_link_frames_sent_total"),
			procCPU(nd.p.cmd.Process.Pid)}
	}
	before := make([]sample, 3)
	for i, nd := range nodes {
		before[i] = take(nd)
	}
	time.Sleep(window)
	for i, nd := range nodes {
		after := take(nd)
		t.Logf("node %d, %d idle queues × 3 replicas: %.0f bytes/s and %.1f frames/s sent over the link, CPU %.2f%%, RSS %d MiB",
			nd.id, n, (after.bytes-before[i].bytes)/window.Seconds(), (after.frames-before[i].frames)/window.Seconds(),
			100*(after.cpu-before[i].cpu).Seconds()/window.Seconds(), procRSS(nd.p.cmd.Process.Pid)>>20)
	}

	for _, nd := range nodes {
		nd.p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, nd := range nodes {
		nd.p.wait()
	}
	restart := time.Now()
	for i, nd := range nodes {
		nd.launch(t, bin, addrs[i], flags...)
	}
	for _, nd := range nodes {
		// Not waitAddrFile, whose 30 s this may exceed: the measurement says how long it took.
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if b, err := os.ReadFile(nd.addrFile); err == nil && json.Unmarshal(b, &nd.addrs) == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d not ready 5 minutes after its restart", nd.id)
			}
		}
		t.Logf("restart: node %d ready (its addr file written) %v after the start", nd.id, time.Since(restart).Round(time.Millisecond))
	}
	for _, i := range []int{0, rand.IntN(n), rand.IntN(n)} {
		q := fmt.Sprintf("idle-%d", i)
		enqueueOnLeader(t, nodes, q, "wake")
		t.Logf("restart: %s took an enqueue %v after the start", q, time.Since(restart).Round(time.Millisecond))
	}
	for i, nd := range nodes {
		t.Logf("node %d after the restart: CPU %.1f s until now, RSS %d MiB", i+1, procCPU(nd.p.cmd.Process.Pid).Seconds(), procRSS(nd.p.cmd.Process.Pid)>>20)
	}
}
