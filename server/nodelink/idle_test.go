package nodelink_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
)

// linkTotals sums what the three nodes' links sent: frames and bytes.
func linkTotals(nodes map[meta.NodeID]*node) (frames, bytes uint64) {
	for _, n := range nodes {
		frames += n.link.Stats().FramesSent.Load()
		bytes += n.link.Stats().BytesSent.Load()
	}
	return frames, bytes
}

// TestMeasureIdleGroups (FILA_MEASURE_IDLE=N only) measures what N idle 3-replica queue groups
// send between the three nodes once they have been idle for three idle timeouts (2 s here): frames
// and bytes per second over 10 s, the three links together, and the queue groups still awake;
// first what the meta group alone sends (it does not hibernate). FILA_MEASURE_IDLE_TIMEOUT sets
// another idle timeout (-1s: the groups never hibernate).
func TestMeasureIdleGroups(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_IDLE"))
	if n == 0 {
		t.Skip("FILA_MEASURE_IDLE=N measures N idle queue groups")
	}
	idle := 2 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FILA_MEASURE_IDLE_TIMEOUT")); err == nil {
		idle = d // negative: the groups never hibernate
	}
	nodes := startBrokersIdle(t, idle)
	const window = 10 * time.Second
	mf0, mb0 := linkTotals(nodes)
	time.Sleep(window)
	mf1, mb1 := linkTotals(nodes)
	t.Logf("the meta group alone: %.1f frames/s, %.0f bytes/s", float64(mf1-mf0)/window.Seconds(), float64(mb1-mb0)/window.Seconds())
	for i := range n {
		name := fmt.Sprint("q", i)
		if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: name}); e != nil {
			t.Fatal(e)
		}
	}
	for i := range n {
		name := fmt.Sprint("q", i)
		eventually(t, name+" has a leader", func() bool { return leaderOf(nodes, name) != "" })
		eventually(t, "a message is enqueued on "+name, func() bool {
			lead := leaderOf(nodes, name)
			return lead != "" && enqueue(t, nodes[lead].b, []broker.Message{{Queue: name, Payload: []byte("x")}})[0].Code == broker.CodeOk
		})
	}
	time.Sleep(3 * max(idle, 2*time.Second)) // a measurement's settling time, not a test's wait
	f0, b0 := linkTotals(nodes)
	g0 := runtime.NumGoroutine()
	time.Sleep(window)
	f1, b1 := linkTotals(nodes)
	awake := 0
	for _, nd := range nodes {
		awake += nd.b.AwakeQueues()
	}
	t.Logf("%d idle 3-replica groups: %.1f frames/s, %.0f bytes/s over the links (three nodes together); %d replicas awake of %d; %d goroutines",
		n, float64(f1-f0)/window.Seconds(), float64(b1-b0)/window.Seconds(), awake, 3*n, g0)
	if awake > 0 {
		return
	}
	// Waking: an enqueue to each sleeping group, through the node whose replica led it when it
	// fell asleep, until one answers Ok.
	var worst, total time.Duration
	for i := range min(n, 20) {
		name := fmt.Sprint("q", i)
		start := time.Now()
		enqueueAll(t, nodes, name, []broker.Message{{Queue: name, Payload: []byte("wake")}})
		took := time.Since(start)
		total += took
		worst = max(worst, took)
	}
	t.Logf("an enqueue to a sleeping group: mean %v, max %v (%d groups)", (total / time.Duration(min(n, 20))).Round(time.Millisecond),
		worst.Round(time.Millisecond), min(n, 20))
}
