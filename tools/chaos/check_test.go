package chaos

import (
	"strings"
	"testing"
	"time"
)

const simSeeds = 300

// A committed broker's histories pass, whatever the interleaving, the unanswered operations,
// the expired leases (redeliveries) and the crashes.
func TestCheckPassesCorrectHistories(t *testing.T) {
	dups := 0
	for seed := range uint64(simSeeds) {
		h := newSim(seed, false).run(400)
		r := Check(h)
		if !r.OK() {
			t.Fatalf("seed %d: a correct history failed:\n%s", seed, violations(r))
		}
		if !r.Drained || r.Enqueued == 0 || r.Acked == 0 {
			t.Fatalf("seed %d: the simulation did nothing: %v", seed, r.Figures)
		}
		dups += r.Duplicated
	}
	if dups == 0 {
		t.Fatal("no simulated history redelivered a message: the at-least-once case is not exercised")
	}
}

// A broker that answers before it commits fails the checker once a crash rolls back what it
// answered, and every violation names a message whose answered enqueue or ack was rolled back.
func TestCheckFailsAckBeforeCommit(t *testing.T) {
	failed := 0
	rules := map[string]int{}
	for seed := range uint64(simSeeds) {
		s := newSim(seed, true)
		r := Check(s.run(400))
		if r.OK() {
			continue
		}
		failed++
		for _, v := range r.Violations {
			rules[v.Rule]++
			if !s.rolled[v.Op.Value] {
				t.Fatalf("seed %d: %v names a message the crash did not touch", seed, v)
			}
			if len(v.Faults) == 0 {
				t.Fatalf("seed %d: %v names no crash in between", seed, v)
			}
		}
	}
	t.Logf("%d of %d histories failed: %v", failed, simSeeds, rules)
	if rules[RuleLost] == 0 || rules[RuleRedeliveredAfterAck] == 0 {
		t.Fatalf("the broker that answers before the commit was not caught both ways: %v", rules)
	}
}

// The smallest history of a broker that answers before the commit: an enqueue answered Ok, a
// kill -9, a drain that finds nothing.
func TestCheckNamesTheEnqueueAnsweredBeforeTheCommit(t *testing.T) {
	ms := time.Millisecond
	h := []Op{
		{Client: 1, Kind: Enqueue, Value: "a", ID: "m1", Outcome: Ok, Invoke: 1 * ms, Complete: 2 * ms},
		{Client: 1, Kind: Enqueue, Value: "b", ID: "m2", Outcome: Ok, Invoke: 3 * ms, Complete: 4 * ms},
		{Client: -1, Kind: Fault, Value: "kill -9 node 1", Outcome: Ok, Invoke: 5 * ms, Complete: 6 * ms},
		{Client: 9, Kind: Deliver, Value: "a", ID: "m1", Invoke: 7 * ms, Complete: 7 * ms, Final: true},
		{Client: 9, Kind: Drained, Outcome: Ok, Invoke: 7 * ms, Complete: 8 * ms},
	}
	r := Check(h)
	if len(r.Violations) != 1 || r.Lost != 1 {
		t.Fatalf("want one lost message, got:\n%s", violations(r))
	}
	v := r.Violations[0]
	if v.Rule != RuleLost || v.Op.Value != "b" || v.Op.Index != 1 || len(v.Faults) != 1 {
		t.Fatalf("want the enqueue of b (#1) lost after the kill, got %v", v)
	}
	if s := v.String(); !strings.Contains(s, "#1 enqueue b") || !strings.Contains(s, "kill -9 node 1") {
		t.Fatalf("the violation does not name the operation and the fault: %s", s)
	}
	// Without the drain nobody knows what is still stored: nothing is called lost.
	if r := Check(h[:4]); !r.OK() || r.Drained {
		t.Fatalf("a history without a drain: %v", violations(r))
	}
}

// Mutations of correct histories: each fails, naming the operation changed.
func TestCheckFailsMutatedHistories(t *testing.T) {
	for seed := range uint64(simSeeds) {
		h := newSim(seed, false).run(400)
		checkMutation(t, seed, "lost", h, loseOne, RuleLost)
		checkMutation(t, seed, "redelivered", h, redeliverAfterAck, RuleRedeliveredAfterAck)
		checkMutation(t, seed, "phantom", h, phantom, RulePhantom)
		checkMutation(t, seed, "other ID", h, otherID, RulePhantom)
	}
}

// checkMutation applies mutate to a copy of h; mutate returns the new history and the value
// of the operation the checker must name (ok false: no operation of the kind to mutate).
func checkMutation(t *testing.T, seed uint64, name string, h []Op, mutate func([]Op) ([]Op, string, bool), rule string) {
	t.Helper()
	m, value, ok := mutate(append([]Op(nil), h...))
	if !ok {
		return
	}
	r := Check(m)
	for _, v := range r.Violations {
		if v.Rule == rule && v.Op.Value == value {
			return
		}
	}
	t.Fatalf("seed %d, %s: want a %q violation naming %s, got:\n%s", seed, name, rule, value, violations(r))
}

// loseOne removes the final drain's delivery of a message enqueued Ok and never acked.
func loseOne(h []Op) ([]Op, string, bool) {
	acked, enqueued := map[string]bool{}, map[string]bool{}
	for _, op := range h {
		switch {
		case op.Kind == Ack:
			acked[op.Value] = true
		case op.Kind == Enqueue && op.Outcome == Ok:
			enqueued[op.Value] = true
		}
	}
	for i, op := range h {
		if op.Kind == Deliver && op.Final && enqueued[op.Value] && !acked[op.Value] {
			out := append(h[:i:i], h[i+1:]...)
			for _, o := range out {
				if o.Kind == Deliver && o.Final && o.Value == op.Value {
					return nil, "", false
				}
			}
			return out, op.Value, true
		}
	}
	return nil, "", false
}

// redeliverAfterAck adds a delivery of a message just after its ack was answered Ok.
func redeliverAfterAck(h []Op) ([]Op, string, bool) {
	for _, op := range h {
		if op.Kind == Ack && op.Outcome == Ok {
			d := Op{Client: 7, Kind: Deliver, Value: op.Value, ID: op.ID, Invoke: op.Complete + 1, Complete: op.Complete + 1}
			return append(h, d), op.Value, true
		}
	}
	return nil, "", false
}

// phantom adds a delivery of a message nobody enqueued.
func phantom(h []Op) ([]Op, string, bool) {
	d := Op{Client: 7, Kind: Deliver, Value: "never-enqueued", ID: "m0", Invoke: 3, Complete: 3}
	return append(h, d), d.Value, true
}

// otherID changes the ID of a delivery of a message enqueued Ok.
func otherID(h []Op) ([]Op, string, bool) {
	ok := map[string]bool{}
	for _, op := range h {
		if op.Kind == Enqueue && op.Outcome == Ok {
			ok[op.Value] = true
		}
	}
	for i, op := range h {
		if op.Kind == Deliver && ok[op.Value] {
			h[i].ID = "other"
			return h, op.Value, true
		}
	}
	return nil, "", false
}

func TestUnavailableWindows(t *testing.T) {
	s := time.Second
	h := []Op{
		{Kind: Enqueue, Value: "a", Outcome: Ok, Invoke: 0, Complete: s / 10},
		{Kind: Deliver, Value: "a", Invoke: s / 5, Complete: s / 5},
		{Kind: Enqueue, Value: "b", Outcome: Unknown, Invoke: s / 5, Complete: 2 * s},
		{Kind: Enqueue, Value: "c", Outcome: Ok, Invoke: 2 * s, Complete: 3 * s},
		{Kind: Deliver, Value: "c", Invoke: 3 * s, Complete: 3 * s},
	}
	r := Check(h)
	want := []Window{{"enqueue", s / 10, 3 * s}, {"deliver", s / 5, 3 * s}}
	if len(r.Unavailable) != 2 || r.Unavailable[0] != want[0] || r.Unavailable[1] != want[1] {
		t.Fatalf("windows %v, want %v", r.Unavailable, want)
	}
	if r.LongestUnavailable() != 3*s-s/10 {
		t.Fatalf("longest %v", r.LongestUnavailable())
	}
}

func violations(r Report) string {
	var b strings.Builder
	for _, v := range r.Violations {
		b.WriteString(v.String() + "\n")
	}
	b.WriteString(r.Figures.String())
	return b.String()
}

// A delivery leased before an ack was answered but taken from the SDK's buffer after it is not
// a delivery after the ack; one leased after it is.
func TestDeliveryCountsFromItsLease(t *testing.T) {
	ms := time.Millisecond
	h := []Op{
		{Client: 1, Kind: Enqueue, Value: "a", ID: "m1", Outcome: Ok, Invoke: 1 * ms, Complete: 2 * ms},
		{Client: 2, Kind: Deliver, Value: "a", ID: "m1", Invoke: 3 * ms, Complete: 3 * ms},
		{Client: 3, Kind: Deliver, Value: "a", ID: "m1", Invoke: 4 * ms, Complete: 9 * ms},
		{Client: 2, Kind: Ack, Value: "a", ID: "m1", Outcome: Ok, Invoke: 5 * ms, Complete: 6 * ms},
	}
	if r := Check(h); !r.OK() || r.Duplicated != 1 {
		t.Fatalf("leased before the ack's answer:\n%s", violations(r))
	}
	h[2].Invoke = 7 * ms
	r := Check(h)
	if len(r.Violations) != 1 || r.Violations[0].Rule != RuleRedeliveredAfterAck || r.Violations[0].Op.Client != 3 {
		t.Fatalf("leased after the ack's answer:\n%s", violations(r))
	}
}

// A correct broker of a grouped queue with deduplication passes: first deliveries in each
// group's order, whatever the redeliveries, the crashes and the unanswered operations, and
// every repeat of an idempotency key answered with the first message's ID.
func TestCheckPassesCorrectGroupedHistories(t *testing.T) {
	repeats, ordered := 0, 0
	for seed := range uint64(simSeeds) {
		h := newGroupedSim(seed).run(400)
		r := Check(h)
		if !r.OK() {
			t.Fatalf("seed %d: a correct history failed:\n%s", seed, violations(r))
		}
		repeats += r.Repeats
		if _, _, ok := reorder(append([]Op(nil), h...)); ok {
			ordered++
		}
	}
	if repeats == 0 || ordered == 0 {
		t.Fatalf("repeats %d, histories with two delivered messages of a group %d: the rules are not exercised", repeats, ordered)
	}
}

// Mutations of correct grouped histories fail the new rules, naming the operation changed.
func TestCheckFailsMutatedGroupedHistories(t *testing.T) {
	for seed := range uint64(simSeeds) {
		h := newGroupedSim(seed).run(400)
		checkMutation(t, seed, "reorder", h, reorder, RuleOrder)
		checkMutation(t, seed, "repeat answered another ID", h, repeatOtherID, RuleDuplicate)
		checkMutation(t, seed, "delivered under another ID", h, otherID, RuleDuplicate)
		checkMutation(t, seed, "two messages of one key", h, twoMessages, RuleDuplicate)
	}
}

// reorder removes the deliveries of a message leased no later than the first delivery of a
// message of its group enqueued after it was answered Ok: that one is then first delivered
// before it.
func reorder(h []Op) ([]Op, string, bool) {
	answered, invoked, first := map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
	group := map[string]string{}
	for _, op := range h {
		switch {
		case op.Kind == Enqueue && op.Outcome == Ok:
			if t, ok := answered[op.Value]; !ok || op.Complete < t {
				answered[op.Value] = op.Complete
			}
			fallthrough
		case op.Kind == Enqueue:
			if t, ok := invoked[op.Value]; !ok || op.Invoke < t {
				invoked[op.Value] = op.Invoke
			}
			group[op.Value] = op.Group
		case op.Kind == Deliver:
			if t, ok := first[op.Value]; !ok || op.Invoke < t {
				first[op.Value] = op.Invoke
			}
		}
	}
	for a, at := range answered {
		for b, fb := range first {
			if a == b || group[a] != group[b] || at >= invoked[b] {
				continue
			}
			out := h[:0:0]
			for _, op := range h {
				if op.Kind != Deliver || op.Value != a || op.Invoke > fb {
					out = append(out, op)
				}
			}
			return out, b, true
		}
	}
	return nil, "", false
}

// repeatOtherID answers a repeat of an idempotency key with another message ID.
func repeatOtherID(h []Op) ([]Op, string, bool) {
	seen := map[string]bool{}
	for i, op := range h {
		if op.Kind != Enqueue || op.Key == "" {
			continue
		}
		if seen[op.Value] && op.Outcome == Ok {
			h[i].ID = "other"
			return h, op.Value, true
		}
		if op.Outcome == Ok {
			seen[op.Value] = true
		}
	}
	return nil, "", false
}

// twoMessages leaves a key's enqueues unanswered and delivers its message under a second ID.
func twoMessages(h []Op) ([]Op, string, bool) {
	for _, op := range h {
		if op.Kind != Deliver {
			continue
		}
		for i := range h {
			if h[i].Kind == Enqueue && h[i].Value == op.Value {
				h[i].Outcome, h[i].ID, h[i].Err = Unknown, "", "timeout"
			}
		}
		d := op
		d.ID, d.Invoke, d.Complete = "other", op.Complete+1, op.Complete+1
		return append(h, d), op.Value, true
	}
	return nil, "", false
}

// The smallest histories of each new rule.
func TestCheckNamesOrderAndDuplicate(t *testing.T) {
	ms := time.Millisecond
	enq := func(v string, seq int, id string, at time.Duration) Op {
		return Op{Client: 1, Kind: Enqueue, Value: v, ID: id, Outcome: Ok, Group: "g", Seq: seq, Key: v, Invoke: at, Complete: at + ms}
	}
	del := func(v, id string, at time.Duration) Op {
		return Op{Client: 2, Kind: Deliver, Value: v, ID: id, Outcome: Ok, Invoke: at, Complete: at}
	}
	h := []Op{enq("a", 1, "m1", 1*ms), enq("b", 2, "m2", 3*ms), del("b", "m2", 5*ms), del("a", "m1", 6*ms)}
	r := Check(h)
	if len(r.Violations) != 1 || r.OutOfOrder != 1 || r.Violations[0].Rule != RuleOrder || r.Violations[0].Op.Value != "b" ||
		r.Violations[0].Cause == nil || r.Violations[0].Cause.Value != "a" {
		t.Fatalf("want b delivered before a:\n%s", violations(r))
	}
	if !strings.Contains(r.Violations[0].String(), "first delivered at 6ms") {
		t.Fatalf("the violation does not say when a was delivered: %s", r.Violations[0])
	}
	// Sent before a was answered, b may go first: its enqueue's order is not known.
	h[1].Invoke = 1 * ms
	if r := Check(h); !r.OK() {
		t.Fatalf("b sent while a was in flight:\n%s", violations(r))
	}
	// A redelivery of a after b's first delivery is at-least-once, not disorder.
	h = []Op{enq("a", 1, "m1", 1*ms), enq("b", 2, "m2", 3*ms), del("a", "m1", 5*ms), del("b", "m2", 6*ms), del("a", "m1", 7*ms)}
	if r := Check(h); !r.OK() {
		t.Fatalf("a redelivered after b:\n%s", violations(r))
	}
	// A repeat of a's key answered with another ID.
	h = []Op{enq("a", 1, "m1", 1*ms), enq("a", 1, "m2", 3*ms), del("a", "m1", 5*ms)}
	r = Check(h)
	if len(r.Violations) != 1 || r.Duplicate != 1 || r.Violations[0].Op.Index != 1 || r.Repeats != 1 {
		t.Fatalf("want the repeat answered m2 named:\n%s", violations(r))
	}
	// Beyond the dedup window the key may make a second message, answered or not.
	h[1].Invoke, h[1].Complete = DedupWindow+2*ms, DedupWindow+3*ms
	if r := Check(h); !r.OK() {
		t.Fatalf("a repeat after the dedup window:\n%s", violations(r))
	}
	h[1].Outcome, h[1].ID = Unknown, ""
	h = append(h, del("a", "m2", DedupWindow+5*ms))
	if r := Check(h); !r.OK() {
		t.Fatalf("an unanswered repeat after the dedup window, delivered:\n%s", violations(r))
	}
	// The same value enqueued twice without a key is still the workload's mistake.
	h = []Op{enq("a", 1, "m1", 1*ms), enq("a", 1, "m1", 3*ms)}
	h[1].Key = ""
	if r := Check(h); len(r.Violations) != 1 || r.Violations[0].Rule != RulePhantom {
		t.Fatalf("a value enqueued twice without its key:\n%s", violations(r))
	}
}
