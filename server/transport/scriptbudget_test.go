package transport

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// These tests drive the script budgets (docs/lua-hooks.md, "Budgets and parking") through FIBP:
// lua.timeout_ms bounds one call, lua.request_budget_ms the calls of the Enqueue requests a queue
// runs together, lua.reclassify_budget_ms one pass over parked messages.

// spinForever spends every call's whole lua.timeout_ms.
const spinForever = `function on_enqueue(msg) while true do end end`

// budgetClient starts a server whose calls have 10 ms and whose Enqueue rounds 50 ms.
func budgetClient(t *testing.T) (*rawClient, string) {
	t.Helper()
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	setConfig(t, c, "lua.timeout_ms", "10")
	setConfig(t, c, "lua.request_budget_ms", "50")
	return c, addr
}

// heavyFrame sends one Enqueue of n messages to queue and counts the messages whose script ran
// (ScriptTimeout: spinForever never returns) and those refused for the budget (ChannelFull, or
// an Error frame with retry_after_ms when the budget left none of them any time); a deleted
// queue's QueueNotFound counts as neither.
func heavyFrame(t *testing.T, c *rawClient, id uint32, queue string, n int) (ran, refused int) {
	t.Helper()
	msgs := make([]fibp.EnqueueMessage, n)
	for i := range msgs {
		msgs[i] = fibp.EnqueueMessage{Queue: queue, Payload: []byte("x")}
	}
	switch r := c.Call(id, &fibp.Enqueue{Messages: msgs}).(type) {
	case *fibp.EnqueueResult:
		for _, res := range r.Results {
			switch res.ErrorCode {
			case fibp.CodeScriptTimeout:
				ran++
			case fibp.CodeChannelFull:
				refused++
			case fibp.CodeQueueNotFound: // deleted meanwhile
			default:
				t.Errorf("item answered %v", res.ErrorCode)
			}
		}
	case *fibp.Error:
		if r.ErrorCode != fibp.CodeChannelFull || r.Metadata["retry_after_ms"] == "" {
			t.Errorf("Enqueue answered %+v", r)
		}
		refused = n
	default:
		t.Fatalf("Enqueue answered %#v", r)
	}
	return ran, refused
}

// One Enqueue frame spends at most lua.request_budget_ms on on_enqueue (plus one call): of 200
// messages whose script spins for its 10 ms, at most a few run in a 50 ms budget and the rest
// are refused ChannelFull, which tells the producer to retry them later. Before, the frame ran
// every script (2,000 messages took 21.5 CPU-s and stalled their queue 22 s).
func TestAFrameSpendsAtMostTheRequestBudgetOnScripts(t *testing.T) {
	c, _ := budgetClient(t)
	newQueue(t, c, &fibp.CreateQueue{Name: "heavy", OnEnqueueScript: wire.Some(spinForever)})
	ran, refused := heavyFrame(t, c, 1, "heavy", 200)
	if ran < 1 || ran > 20 || ran+refused != 200 {
		t.Fatalf("of 200 messages, %d ran their script and %d were refused; want 1 to 20 run (50 ms at 10 ms a call)", ran, refused)
	}
	if s := stats(t, c, "heavy"); s.Depth != 0 {
		t.Fatalf("a refused message was stored: depth %d", s.Depth)
	}
}

// While a producer sends script-heavy frames to a queue without pause, a probe's requests to
// that queue and to another one are answered, and the queue can be deleted: each frame holds
// its queue for a budget, not for every script it carries.
func TestRequestsAreAnsweredWhileScriptHeavyFramesRun(t *testing.T) {
	c, addr := budgetClient(t)
	newQueue(t, c, &fibp.CreateQueue{Name: "heavy", OnEnqueueScript: wire.Some(spinForever)})
	newQueue(t, c, &fibp.CreateQueue{Name: "other"})
	attacker := dialRaw(t, addr)
	attacker.Handshake()
	var stop atomic.Bool
	var frames, worst atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for id := uint32(1); !stop.Load(); id++ {
			ran, _ := heavyFrame(t, attacker, id, "heavy", 200)
			frames.Add(1)
			if int64(ran) > worst.Load() {
				worst.Store(int64(ran))
			}
		}
	}()
	for i := range 20 {
		if s := stats(t, c, "heavy"); s.ErrorCode != fibp.CodeOk {
			t.Fatalf("probe %d: GetStats of the busy queue: %v", i, s.ErrorCode)
		}
		enqueue(t, c, fibp.EnqueueMessage{Queue: "other", Payload: []byte("probe")})
	}
	if s := stats(t, c, "other"); s.Depth != 20 {
		t.Fatalf("the other queue holds %d of the probe's 20 messages", s.Depth)
	}
	if r := c.Call(5, &fibp.DeleteQueue{Queue: "heavy"}).(*fibp.DeleteQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DeleteQueue of the busy queue: %v", r.ErrorCode)
	}
	stop.Store(true)
	wg.Wait()
	if frames.Load() < 1 || worst.Load() > 20 {
		t.Fatalf("%d frames, the worst ran %d scripts; want at most 20 a frame", frames.Load(), worst.Load())
	}
}

// A parked backlog is worked through in passes of lua.reclassify_budget_ms, with the queue's
// requests answered between them: a probe watching the dead-letter queue (every failed try
// dead-letters here) sees it fill a few messages at a time, and its requests to the queue and to
// another one are answered meanwhile. Before, one pass ran the script on every parked message,
// for ever by default (a core at 100%, the queue's requests waiting 24–30 s).
func TestAParkedBacklogIsTriedInPassesWhileRequestsAreAnswered(t *testing.T) {
	c, _ := budgetClient(t)
	setConfig(t, c, "lua.reclassify_interval_ms", "10")
	setConfig(t, c, "lua.reclassify_max_interval_ms", "10")
	setConfig(t, c, "lua.reclassify_budget_ms", "20")
	newQueue(t, c, &fibp.CreateQueue{Name: "p", OnEnqueueScript: wire.Some(spinForever), ScriptFailure: fibp.ScriptFailurePark,
		ParkDeadLetterAfter: 1})
	newQueue(t, c, &fibp.CreateQueue{Name: "other"})
	const backlog = 150
	msgs := make([]fibp.EnqueueMessage, backlog)
	for i := range msgs {
		msgs[i] = fibp.EnqueueMessage{Queue: "p", Payload: []byte("x")}
	}
	enqueue(t, c, msgs...) // parked: a few after their script timed out, the rest for the budget
	seen := map[uint64]bool{}
	probes := 0
	for ; ; probes++ {
		if probes == 100_000 {
			t.Fatalf("the backlog was not dead-lettered after %d probes (saw depths %v)", probes, seen)
		}
		dlq := stats(t, c, "p.dlq")
		if s := stats(t, c, "p"); s.ErrorCode != fibp.CodeOk || dlq.ErrorCode != fibp.CodeOk {
			t.Fatalf("GetStats during the passes: %v, %v", s.ErrorCode, dlq.ErrorCode)
		}
		enqueue(t, c, fibp.EnqueueMessage{Queue: "other", Payload: []byte("probe")})
		if dlq.Depth == backlog {
			break
		}
		seen[dlq.Depth] = true
	}
	delete(seen, 0)
	if len(seen) < 3 {
		t.Fatalf("the probe saw the dead-letter queue at depths %v between 0 and %d: the backlog went in one pass", seen, backlog)
	}
	if s := stats(t, c, "other"); s.Depth != uint64(probes+1) {
		t.Fatalf("the other queue holds %d of the probe's %d messages", s.Depth, probes+1)
	}
}

// slowRetry asks for a retry after a loop that takes milliseconds (well within a 1 s call).
const slowRetry = `function on_failure(msg) for i = 1, 1000000 do end return { action = "retry" } end`

// The on_failure calls of one Nack frame share lua.request_budget_ms too: past it the retry
// policy decides, as when the hook times out — here (max_attempts 1) the dead-letter queue. Of
// 200 nacked messages at most half can have run a hook that takes over a millisecond in a 50 ms
// budget; before, every one ran it (a Nack frame held its queue for as long as its hooks took).
func TestANackFrameSpendsAtMostTheRequestBudgetOnOnFailure(t *testing.T) {
	c, _ := budgetClient(t)
	setConfig(t, c, "lua.timeout_ms", "1000")
	newQueue(t, c, &fibp.CreateQueue{Name: "q", MaxAttempts: 1, Backoff: fibp.BackoffNone, OnFailureScript: wire.Some(slowRetry)})
	msgs := make([]fibp.EnqueueMessage, 200)
	for i := range msgs {
		msgs[i] = fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")}
	}
	enqueue(t, c, msgs...)
	c.Subscribe(2, "q", 200)
	var nacks []fibp.NackItem
	for _, d := range c.Deliveries(200) {
		nacks = append(nacks, fibp.NackItem{Queue: "q", MessageID: d.MessageID, Error: "boom"})
	}
	r := c.Call(4, &fibp.Nack{Items: nacks}).(*fibp.NackResult)
	for i, res := range r.Results {
		if res.ErrorCode != fibp.CodeOk {
			t.Fatalf("nack %d: %v", i, res.ErrorCode)
		}
	}
	dead := stats(t, c, "q.dlq").Depth
	if dead < 100 || dead == 200 {
		t.Fatalf("%d of 200 nacked messages went by the retry policy (dead-lettered): want at least 100, and the hook run first", dead)
	}
}
