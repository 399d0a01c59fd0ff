package nodelink_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
)

// costSample is what the process (three brokers) holds and has used at one moment.
type costSample struct {
	at            time.Time
	cpu           time.Duration // user + system since the process started
	frames, bytes uint64        // sent over the three links
	goroutines    int
	heapInuse     uint64 // after a GC
}

func sampleCost(nodes map[meta.NodeID]*node) costSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	f, b := linkTotals(nodes)
	return costSample{at: time.Now(), cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), frames: f, bytes: b,
		goroutines: runtime.NumGoroutine(), heapInuse: ms.HeapInuse}
}

// costOver measures over window: frames/s, bytes/s and the share of a core used, with the
// goroutines and heap at its end.
func costOver(nodes map[meta.NodeID]*node, window time.Duration) (fps, bps, core float64, end costSample) {
	s0 := sampleCost(nodes)
	time.Sleep(window) // a measurement's window, not a test's wait
	s1 := sampleCost(nodes)
	el := s1.at.Sub(s0.at).Seconds()
	return float64(s1.frames-s0.frames) / el, float64(s1.bytes-s0.bytes) / el, (s1.cpu - s0.cpu).Seconds() / el, s1
}

// TestMeasureActiveGroups (FILA_MEASURE_ACTIVE=N only) measures what N awake but idle 3-replica
// queue groups cost three brokers in one process, with fila-server's cluster timings (heartbeat
// timeout 500 ms, fsync on) and hibernation off: frames and bytes per second over the links (the
// three nodes together), CPU (user + system, a share of one core), goroutines and heap in use
// after a GC, first with the meta group alone, then with the N groups, each over 10 s.
func TestMeasureActiveGroups(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_ACTIVE"))
	if n == 0 {
		t.Skip("FILA_MEASURE_ACTIVE=N measures N awake idle queue groups")
	}
	const window = 10 * time.Second
	nodes := startBrokersAs(t, 500*time.Millisecond)
	time.Sleep(2 * time.Second) // settling, as below
	f0, b0, c0, s0 := costOver(nodes, window)
	for i := range n {
		name := fmt.Sprint("a", i)
		eventually(t, "created "+name, func() bool {
			e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: name})
			return e == nil || e.Code == broker.CodeQueueAlreadyExists
		})
	}
	for i := range n {
		name := fmt.Sprint("a", i)
		eventually(t, "a message is enqueued on "+name, func() bool {
			lead := leaderOf(nodes, name)
			return lead != "" && enqueue(t, nodes[lead].b, []broker.Message{{Queue: name, Payload: []byte("x")}})[0].Code == broker.CodeOk
		})
	}
	time.Sleep(3 * time.Second) // settling after the creations, not a test's wait
	f1, b1, c1, s1 := costOver(nodes, window)
	awake := 0
	for _, nd := range nodes {
		awake += nd.b.AwakeQueues()
	}
	t.Logf("the meta group alone: %.0f frames/s, %.0f bytes/s, %.1f %% of a core, %d goroutines, %.1f MiB heap",
		f0, b0, 100*c0, s0.goroutines, float64(s0.heapInuse)/(1<<20))
	t.Logf("with %d awake idle groups (%d replicas awake): %.0f frames/s, %.0f bytes/s, %.1f %% of a core, %d goroutines, %.1f MiB heap",
		n, awake, f1, b1, 100*c1, s1.goroutines, float64(s1.heapInuse)/(1<<20))
	t.Logf("per group (3 replicas): %.1f frames/s, %.0f bytes/s, %.3f %% of a core, %.1f goroutines, %.0f KiB heap",
		(f1-f0)/float64(n), (b1-b0)/float64(n), 100*(c1-c0)/float64(n), float64(s1.goroutines-s0.goroutines)/float64(n),
		(float64(s1.heapInuse)-float64(s0.heapInuse))/float64(n)/1024)
}
