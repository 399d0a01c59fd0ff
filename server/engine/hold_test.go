package engine

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func leasedIDs(ls []Lease) []MsgID {
	ids := make([]MsgID, len(ls))
	for i, l := range ls {
		ids[i] = l.ID
	}
	return ids
}

func checkDispatch(t *testing.T, q *Queue, now int64, want ...MsgID) {
	t.Helper()
	if got := leasedIDs(q.Dispatch(now, math.MaxInt, nil)); !slices.Equal(got, want) {
		t.Fatalf("Dispatch(%d) = %v, want %v", now, got, want)
	}
	must(t, checkInvariants(q))
}

func checkWakeup(t *testing.T, q *Queue, want int64) {
	t.Helper()
	if at, ok := q.NextWakeup(); !ok || at != want {
		t.Fatalf("NextWakeup = %d %v, want %d", at, ok, want)
	}
}

// Held messages are not delivered before the hold ends, and are afterwards, without an attempt
// counted by the hold; messages that become ready during the hold are delivered normally.
func TestHoldKeepsReadyMessagesUntilItEnds(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "a", 1), msg(2, "a", 1), msg(3, "b", 1), Message{ID: mid(4), FairnessKey: "b", NotBefore: 50})
	q.Hold(10, 100)
	if s := q.Stats(); q.Held() != 3 || s.Held != 3 || s.Depth != 4 || s.ActiveFairnessKeys != 0 {
		t.Fatalf("after Hold: held %d, %+v", q.Held(), s)
	}
	must(t, checkInvariants(q))
	checkDispatch(t, q, 10)
	checkWakeup(t, q, 50)
	enqueue(t, q, 20, msg(5, "a", 1))
	checkDispatch(t, q, 20, mid(5)) // enqueued after Hold
	checkDispatch(t, q, 50, mid(4)) // promoted during the hold
	checkWakeup(t, q, 100)
	checkDispatch(t, q, 99)
	for _, n := range []uint64{1, 2, 3} {
		if m, _ := q.Get(mid(n)); m.State != StateReady || m.Attempts != 0 {
			t.Fatalf("held message %d = %+v, want ready with no attempt", n, m)
		}
	}
	checkDispatch(t, q, 100, mid(1), mid(3), mid(2)) // a joins the round first: it has the oldest
	for _, n := range []uint64{1, 2, 3} {
		if m, _ := q.Get(mid(n)); m.Attempts != 1 {
			t.Fatalf("released message %d has %d attempts, want 1 (its delivery)", n, m.Attempts)
		}
	}
	if q.Held() != 0 {
		t.Fatalf("%d still held", q.Held())
	}
	checkWakeup(t, q, 30_020)
}

// Ack, Nack and ExtendLease work on held messages (the consumer may hold an unrecorded lease);
// Extend leases the message to the consumer; no attempt is counted for the hold.
func TestHoldAckNackExtend(t *testing.T) {
	q := newTestQueue(t, DefaultConfig()) // exponential retry from 1 s
	must(t, q.Subscribe("c", 0))
	var msgs []Message
	for n := range uint64(5) {
		msgs = append(msgs, Message{ID: mid(n + 1), FairnessKey: "k", Attempts: 2})
	}
	enqueue(t, q, 0, msgs...)
	q.Hold(0, 100)
	must(t, q.CheckLease(mid(1), 99))
	if err := q.CheckLease(mid(1), 100); !errors.Is(err, ErrMessageNotFound) {
		t.Fatalf("CheckLease at the end of the hold = %v", err)
	}
	if err := q.ApplyLease(Lease{ID: mid(1), LeasedAt: 1}); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "held") {
		t.Fatalf("ApplyLease of a held message = %v", err)
	}
	must(t, q.ApplyAck(Ack{ID: mid(1)}))

	f, err := q.DecideFailure(mid(2), 10, "nack", nil)
	must(t, err)
	if want := (Fail{ID: mid(2), At: 10, Error: "nack", NotBefore: 2010, Attempts: 2}); f != want {
		t.Fatalf("DecideFailure of a held message = %+v, want %+v", f, want)
	}
	m, err := q.ApplyFail(f)
	must(t, err)
	if m.State != StateDelayed || m.Attempts != 2 || m.LastError != "nack" {
		t.Fatalf("nacked held message = %+v", m)
	}
	f, err = q.DecideFailure(mid(3), 10, "now", new(uint64))
	must(t, err)
	_, err = q.ApplyFail(f)
	must(t, err)
	checkDispatch(t, q, 10, mid(3)) // retried at once: ready, not held

	e, err := q.DecideExtend(mid(4), 20, 5000)
	must(t, err)
	e.Consumer = "c2"
	must(t, q.ApplyExtend(e))
	m, _ = q.Get(mid(4))
	if m.State != StateLeased || m.Consumer != "c2" || m.LeasedAt != 20 || m.LeaseExpiresAt != 5020 || m.Attempts != 2 {
		t.Fatalf("extended held message = %+v", m)
	}
	if got := q.Expired(5020, nil); !slices.Contains(got, mid(4)) {
		t.Fatalf("Expired(5020) = %v, want the reclaimed lease", got)
	}
	if _, err := q.ApplyRemove(Remove{ID: mid(5), At: 30}); err != nil || q.Held() != 0 {
		t.Fatalf("Remove of a held message: %v, %d held", err, q.Held())
	}
	if at, _ := q.NextWakeup(); at == 100 {
		t.Fatal("NextWakeup reports a hold with nothing held")
	}
	if err := q.ApplyExtend(Extend{ID: mid(3), ExpiresAt: 1}); err != nil {
		t.Fatalf("extending the lease of the retried message: %v", err)
	}
	enqueue(t, q, 40, msg(6, "k", 1))
	if err := q.ApplyExtend(Extend{ID: mid(6), ExpiresAt: 1}); !errors.Is(err, ErrMessageNotFound) {
		t.Fatalf("ApplyExtend of a ready message = %v", err)
	}
	must(t, checkInvariants(q))
}

// At the end of a hold, held messages join the end of their keys' FIFOs in enqueue order (after
// what became ready during the hold; after the delayed messages due before the end, before those
// due at it), and keys join the round in the order of their oldest held message. A snapshot
// taken during the hold reports that order, and restores as if released.
func TestHoldReleaseOrderAndSnapshot(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	enqueue(t, q, 0, msg(1, "a", 1), msg(2, "b", 1), msg(3, "a", 1), msg(4, "c", 1),
		Message{ID: mid(5), FairnessKey: "d", NotBefore: 50}, Message{ID: mid(6), FairnessKey: "d", NotBefore: 100})
	enqueue(t, q, 0, msg(7, "d", 1))
	q.Hold(0, 100)
	must(t, q.ApplyAck(Ack{ID: mid(1)})) // b now has the oldest held message
	enqueue(t, q, 10, msg(8, "c", 1))    // c is in the round with 8; 4 follows it
	wantKeys := []KeySnapshot{{Name: "c", Weight: 1, InRound: true, Ready: 2}, {Name: "b", Weight: 1, InRound: true, Ready: 1},
		{Name: "a", Weight: 1, InRound: true, Ready: 1}, {Name: "d", Weight: 1, InRound: true, Ready: 1}}
	if got := slices.Collect(q.SnapshotKeys()); !cmp.Equal(got, wantKeys) {
		t.Fatalf("SnapshotKeys during the hold = %+v, want %+v", got, wantKeys)
	}
	for _, k := range wantKeys {
		if got := len(slices.Collect(q.ReadyOrder(k.Name))); got != k.Ready {
			t.Errorf("ReadyOrder(%q) yields %d IDs during the hold, its snapshot counts %d", k.Name, got, k.Ready)
		}
	}
	if got := slices.Collect(q.ReadyOrder("c")); !cmp.Equal(got, []MsgID{mid(8), mid(4)}) {
		t.Fatalf("ReadyOrder(c) during the hold = %v", got)
	}
	q.Advance(99) // 5 is ready: d is in the round
	restored := restore(t, q)
	if restored.Held() != 0 {
		t.Fatal("the restored queue holds messages")
	}
	q.Advance(100)
	restored.Advance(100)
	checkSameQueue(t, q, restored, 100)
	if got := slices.Collect(q.ReadyOrder("d")); !cmp.Equal(got, []MsgID{mid(5), mid(7), mid(6)}) {
		t.Fatalf("FIFO of d after the release = %v, want [5 7 6]", got)
	}
	for _, q := range []*Queue{q, restored} {
		must(t, q.Subscribe("c", 0))
		checkDispatch(t, q, 100, mid(8), mid(5), mid(2), mid(3), mid(4), mid(7), mid(6))
	}
}

// Hold again holds what became ready since and replaces the end; an end at or before now
// releases at once.
func TestHoldAgain(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(2, "a", 1))
	q.Hold(0, 100)
	enqueue(t, q, 10, msg(1, "a", 1))
	q.Hold(20, 200)
	if q.Held() != 2 {
		t.Fatalf("%d held, want 2", q.Held())
	}
	checkWakeup(t, q, 200)
	checkDispatch(t, q, 150)
	must(t, q.CheckLease(mid(2), 150))
	q.Hold(160, 160)
	checkDispatch(t, q, 160, mid(2), mid(1)) // enqueue order
	q.Hold(170, 300)                         // nothing ready: nothing held, no wake-up
	if at, _ := q.NextWakeup(); q.Held() != 0 || at == 300 {
		t.Fatal("an empty hold wakes the queue")
	}
}

// A hold's end moved later keeps the held messages held until then and holds nothing more;
// moved to now it releases them at once, as its end would: after the delayed messages due before
// it; with nothing held it changes nothing.
func TestSetHoldEnd(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(2, "a", 1), msg(1, "b", 1), Message{ID: mid(3), FairnessKey: "a", NotBefore: 40})
	q.Hold(10, 30)
	checkDispatch(t, q, 20)
	enqueue(t, q, 25, msg(4, "b", 1))
	q.SetHoldEnd(25, 1000) // the message enqueued since is not held
	checkDispatch(t, q, 30, mid(4))
	if until, held := q.HoldUntil(); !held || until != 1000 {
		t.Fatalf("HoldUntil = %d, %v after SetHoldEnd(25, 1000)", until, held)
	}
	q.SetHoldEnd(50, 50) // the delayed message, due before the end, joins first, as at the hold's own end
	if q.Held() != 0 {
		t.Fatalf("%d still held after the hold's end was moved to now", q.Held())
	}
	if _, held := q.HoldUntil(); held {
		t.Fatal("HoldUntil reports a hold after its end was moved to now")
	}
	checkDispatch(t, q, 50, mid(3), mid(1), mid(2))
	q.SetHoldEnd(60, 2000)
	if _, held := q.HoldUntil(); held {
		t.Fatal("SetHoldEnd with nothing held started a hold")
	}
	must(t, checkInvariants(q))
}

// holdSim drives a queue with holds: held messages are never delivered before the hold ends,
// are claimed by Ack, Nack and Extend, keep their attempts, and a snapshot at any point
// restores to the queue the release would give.
type holdSim struct {
	q     *Queue
	now   int64
	next  uint64
	until int64
	held  map[MsgID]uint32 // model: held messages and their attempts
}

func (s *holdSim) enqueue(t *rapid.T) {
	var c Enqueue
	c.At = s.now
	for range rapid.IntRange(1, 4).Draw(t, "n") {
		s.next++
		m := Message{ID: mid(s.next), FairnessKey: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key")}
		if rapid.Bool().Draw(t, "delayed") {
			m.NotBefore = s.now + rapid.Int64Range(1, 300).Draw(t, "delay")
		}
		c.Msgs = append(c.Msgs, m)
	}
	must(t, s.q.ApplyEnqueue(c))
	s.released(t)
}

// released updates the model after an operation that promotes at s.now.
func (s *holdSim) released(t *rapid.T) {
	if len(s.held) == 0 || s.now < s.until {
		return
	}
	for id, attempts := range s.held {
		if m, _ := s.q.Get(id); m.Attempts != attempts && m.State == StateReady {
			t.Fatalf("released %v has %d attempts, held with %d", id, m.Attempts, attempts)
		}
	}
	clear(s.held)
}

func (s *holdSim) hold(t *rapid.T) {
	s.until = s.now + rapid.Int64Range(0, 500).Draw(t, "grace")
	s.q.Hold(s.now, s.until)
	s.released(t)
	if s.until > s.now {
		for m := range s.q.Messages() {
			if m.State == StateReady {
				s.held[m.ID] = m.Attempts
			}
		}
	}
}

func (s *holdSim) dispatch(t *rapid.T) {
	ls := s.q.Dispatch(s.now, rapid.IntRange(0, 5).Draw(t, "max"), nil)
	s.released(t)
	for _, l := range ls {
		if _, ok := s.held[l.ID]; ok {
			t.Fatalf("held %v delivered at %d, hold until %d", l.ID, s.now, s.until)
		}
	}
}

// claim acks, nacks or extends a leased or held message, as a consumer may.
func (s *holdSim) claim(t *rapid.T) {
	var ids []MsgID
	for m := range s.q.Messages() {
		if s.q.CheckLease(m.ID, s.now) == nil {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		t.Skip("nothing to claim")
	}
	id := rapid.SampledFrom(ids).Draw(t, "id")
	before, _ := s.q.Get(id)
	switch rapid.IntRange(0, 2).Draw(t, "how") {
	case 0:
		must(t, s.q.ApplyAck(Ack{ID: id}))
	case 1:
		f, err := s.q.DecideFailure(id, s.now, "nack", new(uint64))
		must(t, err)
		_, err = s.q.ApplyFail(f)
		must(t, err)
		defer s.released(t)
	default:
		e, err := s.q.DecideExtend(id, s.now, rapid.Uint64Range(1, 500).Draw(t, "by"))
		must(t, err)
		e.Consumer = "reclaimer"
		must(t, s.q.ApplyExtend(e))
	}
	if after, ok := s.q.Get(id); ok && after.Attempts != before.Attempts {
		t.Fatalf("claiming %v changed its attempts from %d to %d", id, before.Attempts, after.Attempts)
	}
	delete(s.held, id)
}

func (s *holdSim) expire(t *rapid.T) {
	for _, id := range s.q.Expired(s.now, nil) {
		f, err := s.q.DecideFailure(id, s.now, "lease expired", nil)
		must(t, err)
		_, err = s.q.ApplyFail(f) // a timed command: it may end the hold
		must(t, err)
		s.released(t)
	}
}

// jump goes to the end of the hold, checking that a snapshot taken before it restores to the
// queue the release gives (when no delayed message comes due before the end, which the live
// queue would order before the held ones).
func (s *holdSim) jump(t *rapid.T) {
	if len(s.held) == 0 {
		t.Skip("nothing held")
	}
	for m := range s.q.Messages() {
		if m.State == StateDelayed && m.NotBefore < s.until {
			t.Skip("a delayed message comes due before the end")
		}
	}
	r := restore(t, s.q)
	must(t, r.Subscribe("c", 0))
	s.now = s.until
	s.q.Advance(s.now)
	r.Advance(s.now)
	s.released(t)
	checkSameQueue(t, s.q, r, s.now)
}

func (s *holdSim) check(t *rapid.T) {
	must(t, checkInvariants(s.q))
	if s.q.Held() != len(s.held) {
		t.Fatalf("Held() = %d, model %d", s.q.Held(), len(s.held))
	}
	r := restore(t, s.q)
	same(t, "messages", slices.Collect(s.q.Messages()), slices.Collect(r.Messages()))
	keys := slices.Collect(s.q.SnapshotKeys())
	same(t, "keys", keys, slices.Collect(r.SnapshotKeys()))
	for _, k := range keys {
		same(t, "FIFO of "+k.Name, slices.Collect(s.q.ReadyOrder(k.Name)), slices.Collect(r.ReadyOrder(k.Name)))
	}
}

func TestPropertyHold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.VisibilityTimeoutMs = 200
		s := &holdSim{q: newTestQueue(t, cfg), held: map[MsgID]uint32{}}
		must(t, s.q.Subscribe("c", 0))
		t.Repeat(map[string]func(*rapid.T){
			"enqueue":  s.enqueue,
			"tick":     func(t *rapid.T) { s.now += rapid.Int64Range(0, 150).Draw(t, "dt") },
			"hold":     s.hold,
			"dispatch": s.dispatch,
			"claim":    s.claim,
			"expire":   s.expire,
			"jump":     s.jump,
			"":         s.check,
		})
	})
}
