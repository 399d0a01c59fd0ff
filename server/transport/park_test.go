package transport

import (
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// These tests drive parking (concepts.md, "When on_enqueue fails") and redrive with
// reclassification through FIBP.

// gatedHook fails on messages with header bad=1 until the runtime config says fixed=yes.
const gatedHook = `
function on_enqueue(msg)
  if msg.headers.bad == "1" and fila.get("fixed") ~= "yes" then error("not yet") end
  return { fairness_key = "classified" }
end`

func update(t *testing.T, c *rawClient, u *fibp.UpdateQueue) {
	t.Helper()
	if r := c.Call(104, u).(*fibp.UpdateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("UpdateQueue: %v", r.ErrorCode)
	}
}

func redrive(t *testing.T, c *rawClient, dlq string, mode fibp.Reclassify) *fibp.RedriveResult {
	t.Helper()
	r := c.Call(105, &fibp.Redrive{DLQQueue: dlq, Reclassify: mode}).(*fibp.RedriveResult)
	if r.ErrorCode != fibp.CodeOk {
		t.Fatalf("Redrive: %v", r.ErrorCode)
	}
	return r
}

var bad = map[string]string{"bad": "1"}

// A parked message is accepted with an ID, counted as unclassified, never delivered, and
// classified (then delivered) when the queue's script changes.
func TestParkedMessagesWaitForAScriptThatClassifiesThem(t *testing.T) {
	c := scriptClient(t)
	newQueue(t, c, &fibp.CreateQueue{Name: "p", ScriptFailure: fibp.ScriptFailurePark, OnEnqueueScript: wire.Some(gatedHook)})
	ids := enqueue(t, c, fibp.EnqueueMessage{Queue: "p", Headers: bad, Payload: []byte("1")},
		fibp.EnqueueMessage{Queue: "p", Headers: bad, Payload: []byte("2")})
	c.Subscribe(2, "p", 10)
	s := stats(t, c, "p")
	if s.Depth != 2 || s.Unclassified != 2 || s.OldestUnclassifiedAt == 0 || s.InFlight != 0 || s.ActiveFairnessKeys != 0 {
		t.Fatalf("after parking two: %+v", s)
	}
	update(t, c, &fibp.UpdateQueue{Queue: "p", OnEnqueueChange: fibp.ScriptChangeSet,
		OnEnqueueScript: `function on_enqueue(msg) return { fairness_key = "fixed-" .. msg.headers.bad } end`})
	for i, d := range c.Deliveries(2) {
		if d.MessageID != ids[i] || d.FairnessKey != "fixed-1" || d.AttemptCount != 1 {
			t.Fatalf("delivery %d: %+v", i, d)
		}
	}
	if s := stats(t, c, "p"); s.Unclassified != 0 || s.OldestUnclassifiedAt != 0 {
		t.Fatalf("after reclassification: %+v", s)
	}
}

// Parked messages are classified again every lua.reclassify_interval_ms.
func TestParkedMessagesAreReclassifiedPeriodically(t *testing.T) {
	c := scriptClient(t)
	setConfig(t, c, "lua.reclassify_interval_ms", "20")
	newQueue(t, c, &fibp.CreateQueue{Name: "p", ScriptFailure: fibp.ScriptFailurePark, OnEnqueueScript: wire.Some(gatedHook)})
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "p", Headers: bad, Payload: []byte("x")})[0]
	c.Subscribe(2, "p", 10)
	if s := stats(t, c, "p"); s.Unclassified != 1 || s.InFlight != 0 {
		t.Fatalf("after parking: %+v", s)
	}
	setConfig(t, c, "lua.env.fixed", "yes")
	if d := c.Deliveries(1)[0]; d.MessageID != id || d.FairnessKey != "classified" {
		t.Fatalf("delivery %+v", d)
	}
}

// After park_dead_letter_after failed tries a parked message is dead-lettered unclassified; a
// redrive then honours reclassify: none leaves it in the DLQ, unclassified_only runs the script
// (which parks it again while it fails), all runs it for every message.
func TestParkToDeadLetterAndRedriveModes(t *testing.T) {
	c := scriptClient(t)
	setConfig(t, c, "lua.reclassify_interval_ms", "20")
	newQueue(t, c, &fibp.CreateQueue{Name: "p", ScriptFailure: fibp.ScriptFailurePark, ParkDeadLetterAfter: 2, MaxAttempts: 1,
		OnEnqueueScript: wire.Some(gatedHook)})
	parked := enqueue(t, c, fibp.EnqueueMessage{Queue: "p", Headers: bad, Payload: []byte("u")})[0]
	waitFor(t, func() bool { return stats(t, c, "p.dlq").Depth == 1 })
	if s := stats(t, c, "p"); s.Depth != 0 || s.Unclassified != 0 {
		t.Fatalf("the parent after dead-lettering: %+v", s)
	}
	// A classified message joins it in the DLQ (max_attempts 1).
	good := enqueue(t, c, fibp.EnqueueMessage{Queue: "p", Payload: []byte("c")})[0]
	c.Subscribe(2, "p", 10)
	if d := c.Deliveries(1)[0]; d.MessageID != good {
		t.Fatalf("delivery %+v", d)
	}
	c.Call(3, &fibp.Nack{Items: []fibp.NackItem{{Queue: "p", MessageID: good, Error: "boom"}}})
	waitFor(t, func() bool { return stats(t, c, "p.dlq").Depth == 2 })

	if r := redrive(t, c, "p.dlq", fibp.ReclassifyNone); r.Redriven != 1 || r.LeftUnclassified != 1 || r.RejectedByScript != 0 {
		t.Fatalf("reclassify none: %+v", r)
	}
	if d := c.Deliveries(1)[0]; d.MessageID != good || d.FairnessKey != "classified" || d.RedriveCount != 1 {
		t.Fatalf("redriven classified message %+v", d)
	}
	c.Call(4, &fibp.Ack{Items: []fibp.AckItem{{Queue: "p", MessageID: good}}})

	// The script still fails: the parking queue takes it back parked, and dead-letters it again.
	if r := redrive(t, c, "p.dlq", fibp.ReclassifyUnclassifiedOnly); r.Redriven != 1 || r.LeftUnclassified != 0 {
		t.Fatalf("reclassify unclassified_only: %+v", r)
	}
	waitFor(t, func() bool { return stats(t, c, "p.dlq").Depth == 1 })

	setConfig(t, c, "lua.env.fixed", "yes")
	if r := redrive(t, c, "p.dlq", fibp.ReclassifyAll); r.Redriven != 1 {
		t.Fatalf("reclassify all: %+v", r)
	}
	if d := c.Deliveries(1)[0]; d.MessageID != parked || d.FairnessKey != "classified" || d.RedriveCount != 2 {
		t.Fatalf("redriven reclassified message %+v", d)
	}
}

// On a rejecting queue a redriven message whose reclassification fails stays in the DLQ.
func TestRedriveLeavesMessagesTheScriptRejects(t *testing.T) {
	c := scriptClient(t)
	newQueue(t, c, &fibp.CreateQueue{Name: "r", MaxAttempts: 1, OnEnqueueScript: wire.Some(gatedHook)})
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "r", Payload: []byte("x")})[0]
	c.Subscribe(2, "r", 1)
	c.Deliveries(1)
	c.Call(3, &fibp.Nack{Items: []fibp.NackItem{{Queue: "r", MessageID: id, Error: "boom"}}})
	waitFor(t, func() bool { return stats(t, c, "r.dlq").Depth == 1 })
	update(t, c, &fibp.UpdateQueue{Queue: "r", OnEnqueueChange: fibp.ScriptChangeSet, OnEnqueueScript: `function on_enqueue(m) error("no") end`})
	if r := redrive(t, c, "r.dlq", fibp.ReclassifyAll); r.Redriven != 0 || r.RejectedByScript != 1 {
		t.Fatalf("reclassify all with a failing script: %+v", r)
	}
	if r := redrive(t, c, "r.dlq", fibp.ReclassifyUnclassifiedOnly); r.Redriven != 1 || r.RejectedByScript != 0 {
		t.Fatalf("reclassify unclassified_only of a classified message: %+v", r)
	}
}

// A restart keeps parked messages parked (with their acceptance time) and the attributes
// on_enqueue gave, which on_failure still reads.
func TestRestartKeepsParkedStateAndAttributes(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialRaw(t, addr)
	c.Handshake()
	relaxBudget(t, c)
	newQueue(t, c, &fibp.CreateQueue{Name: "p", ScriptFailure: fibp.ScriptFailurePark, OnEnqueueScript: wire.Some(gatedHook)})
	newQueue(t, c, &fibp.CreateQueue{Name: "a", MaxAttempts: 5,
		OnEnqueueScript: wire.Some(`function on_enqueue(m) return { attributes = { tier = m.headers.tier } } end`),
		OnFailureScript: wire.Some(`function on_failure(m) if m.attributes.tier == "gold" then return { action = "dlq" } end end`)})
	parked := enqueue(t, c, fibp.EnqueueMessage{Queue: "p", Headers: bad, Payload: []byte("x")})[0]
	gold := enqueue(t, c, fibp.EnqueueMessage{Queue: "a", Headers: map[string]string{"tier": "gold"}, Payload: []byte("g")})[0]
	before := stats(t, c, "p")
	stop()

	addr, stop = startAt(t, dir)
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	relaxBudget(t, c)
	if s := stats(t, c, "p"); s.Unclassified != 1 || s.OldestUnclassifiedAt != before.OldestUnclassifiedAt || s.Depth != 1 {
		t.Fatalf("after the restart: %+v, before %+v", s, before)
	}
	c.Subscribe(2, "a", 1)
	if d := c.Deliveries(1)[0]; d.MessageID != gold {
		t.Fatalf("delivery %+v", d)
	}
	c.Call(3, &fibp.Nack{Items: []fibp.NackItem{{Queue: "a", MessageID: gold, Error: "boom"}}})
	waitFor(t, func() bool { return stats(t, c, "a.dlq").Depth == 1 }) // on_failure read the attribute

	setConfig(t, c, "lua.env.fixed", "yes")
	update(t, c, &fibp.UpdateQueue{Queue: "p", OnEnqueueChange: fibp.ScriptChangeSet, OnEnqueueScript: gatedHook})
	c.Subscribe(4, "p", 1)
	if d := c.Deliveries(1)[0]; d.MessageID != parked {
		t.Fatalf("delivery after the restart %+v", d)
	}
}
