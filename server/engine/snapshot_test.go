package engine

import (
	"errors"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// tieBreakHistory stores a keeper message and then ids (in that enqueue order) in key "k", all
// delayed until 100. With reuse, slots and lease indices are first filled and freed, so that the
// later messages get them in reverse order.
func tieBreakHistory(t *testing.T, ids []MsgID, reuse bool) *Queue {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "keep", 1))
	must(t, q.ApplyLease(Lease{ID: mid(1), Consumer: "c", ExpiresAt: math.MaxInt64}))
	if reuse {
		fillers := []Message{msg(2, "x", 1), msg(3, "x", 1), msg(4, "x", 1), msg(5, "x", 1)}
		enqueue(t, q, 0, fillers...)
		q.Dispatch(0, len(fillers), nil)
		for _, m := range fillers {
			must(t, q.ApplyAck(Ack{ID: m.ID}))
		}
	}
	var batch []Message
	for _, id := range ids {
		batch = append(batch, Message{ID: id, FairnessKey: "k", NotBefore: 100})
	}
	enqueue(t, q, 0, batch...)
	return q
}

// Equal times are ordered by message ID, never by slot or lease index: two histories that store
// the same messages at different slots, and lease them under different lease indices, promote
// and expire in the same order.
func TestTieBreaksIgnoreSlotAllocation(t *testing.T) {
	ids := []MsgID{mid(30), mid(10), mid(20), mid(40)} // enqueue order
	byID := []MsgID{mid(10), mid(20), mid(30), mid(40)}
	fresh, reused := tieBreakHistory(t, ids, false), tieBreakHistory(t, ids, true)
	s1, _ := fresh.index.find(ids[0], fresh.slab)
	s2, _ := reused.index.find(ids[0], reused.slab)
	if s1 == s2 {
		t.Fatal("the histories allocate the same slots: the test proves nothing")
	}
	for _, q := range []*Queue{fresh, reused} {
		q.Advance(100)
		if got := slices.Collect(q.ReadyOrder("k")); !cmp.Equal(got, byID) {
			t.Fatalf("promoted %v, want ID order %v", got, byID)
		}
		must(t, checkInvariants(q))
	}
	ls1, ls2 := fresh.Dispatch(100, 10, nil), reused.Dispatch(100, 10, nil)
	if diff := cmp.Diff(ls1, ls2); diff != "" {
		t.Fatalf("deliveries differ (-fresh +reused):\n%s", diff)
	}
	l1 := fresh.slab.at(s1).next
	l2 := reused.slab.at(s2).next
	if l1 == l2 {
		t.Fatal("the histories allocate the same lease indices: the test proves nothing")
	}
	if diff := cmp.Diff(slices.Collect(fresh.Messages()), slices.Collect(reused.Messages())); diff != "" {
		t.Fatalf("messages differ (-fresh +reused):\n%s", diff)
	}
	for _, q := range []*Queue{fresh, reused} {
		if got := q.Expired(ls1[0].ExpiresAt, nil); !cmp.Equal(got, byID) {
			t.Fatalf("Expired = %v, want ID order %v", got, byID)
		}
	}
}

// restoredQueue builds a queue with every kind of state: keys mid-turn with deficits, keys out
// of the round, delayed, leased and retried messages, bodies and errors.
func restoredQueue(t *testing.T) *Queue {
	cfg := DefaultConfig()
	cfg.Quantum = 2
	q := newTestQueue(t, cfg)
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "a", 2), msg(2, "a", 2), msg(3, "b", 1), msg(4, "a", 2), msg(5, "b", 3),
		Message{ID: mid(6), FairnessKey: "c", NotBefore: 500, Headers: map[string]string{"h": "v"}, Payload: []byte("p")},
		msg(7, "d", 1), msg(8, "b", 1))
	q.Dispatch(10, 2, nil) // a: deficit 4, two spent
	f, err := q.DecideFailure(mid(1), 20, "boom", new(uint64))
	must(t, err)
	_, err = q.ApplyFail(f) // 1 goes to the back of a
	must(t, err)
	must(t, q.ApplyAck(Ack{ID: mid(7)})) // d is forgotten
	return q
}

// checkSameQueue compares everything a Queue reports about itself, at now.
func checkSameQueue(t tb, want, got *Queue, now int64) {
	t.Helper()
	diff := func(what string, a, b any) {
		t.Helper()
		if reflect.DeepEqual(a, b) { // cmp.Diff is slow enough to dominate the property tests
			return
		}
		t.Fatalf("%s differ (-want +got):\n%s", what, cmp.Diff(a, b))
	}
	diff("messages", slices.Collect(want.Messages()), slices.Collect(got.Messages()))
	diff("stats", want.Stats(), got.Stats())
	keys := slices.Collect(want.SnapshotKeys())
	diff("keys", keys, slices.Collect(got.SnapshotKeys()))
	for _, k := range keys {
		diff("FIFO of "+k.Name, slices.Collect(want.ReadyOrder(k.Name)), slices.Collect(got.ReadyOrder(k.Name)))
	}
	w1, ok1 := want.NextWakeup()
	w2, ok2 := got.NextWakeup()
	diff("wake-up", []any{w1, ok1}, []any{w2, ok2})
	for _, at := range []int64{now, now + 1000, now + 30_000, now + 1<<40} {
		diff("expired", want.Expired(at, nil), got.Expired(at, nil))
	}
}

func TestRestoreKeepsEverything(t *testing.T) {
	q := restoredQueue(t)
	r := restore(t, q)
	must(t, r.Subscribe("c", 0)) // live state: the same subscription as q's
	checkSameQueue(t, q, r, 20)
	if got := slices.Collect(q.ReadyOrder("a")); !cmp.Equal(got, []MsgID{mid(4), mid(1)}) {
		t.Fatalf("FIFO of a = %v", got)
	}
	if got := slices.Collect(q.SnapshotKeys()); got[0] != (KeySnapshot{Name: "a", Weight: 2, Deficit: 2, InRound: true, Ready: 2}) ||
		got[len(got)-1] != (KeySnapshot{Name: "c", Weight: 1}) {
		t.Fatalf("SnapshotKeys = %+v", got)
	}
	if got := slices.Collect(q.ReadyOrder("nope")); len(got) != 0 {
		t.Fatalf("ReadyOrder of an unknown key = %v", got)
	}
	for _, now := range []int64{20, 500, 40_000} {
		if diff := cmp.Diff(q.Dispatch(now, math.MaxInt, nil), r.Dispatch(now, math.MaxInt, nil)); diff != "" {
			t.Fatalf("deliveries at %d differ (-live +restored):\n%s", now, diff)
		}
		checkSameQueue(t, q, r, now)
	}
}

// snapshotData is a snapshot as plain data, to be corrupted.
type snapshotData struct {
	msgs []Message
	keys []KeySnapshot
	fifo map[string][]MsgID
}

func takeSnapshot(q *Queue) snapshotData {
	s := snapshotData{msgs: slices.Collect(q.Messages()), keys: slices.Collect(q.SnapshotKeys()), fifo: map[string][]MsgID{}}
	for _, k := range s.keys {
		s.fifo[k.Name] = slices.Collect(q.ReadyOrder(k.Name))
	}
	return s
}

func (s snapshotData) restore(cfg Config) (*Queue, error) {
	r, err := NewRestorer("q", cfg)
	if err != nil {
		return nil, err
	}
	for _, m := range s.msgs {
		if err := r.AddMessage(m); err != nil {
			return nil, err
		}
	}
	for _, k := range s.keys {
		if err := r.AddKey(k); err != nil {
			return nil, err
		}
		for _, id := range s.fifo[k.Name] {
			if err := r.AddReady(id); err != nil {
				return nil, err
			}
		}
	}
	return r.Queue()
}

func TestRestoreRefusesCorruptSnapshots(t *testing.T) {
	q := restoredQueue(t) // round a [4 1], b [3 5 8]; c delayed (6); 2 leased
	for _, tc := range []struct {
		name    string
		corrupt func(s *snapshotData)
		want    string
	}{
		{"ready ID in two FIFOs", func(s *snapshotData) { s.fifo["b"] = append(s.fifo["b"], mid(4)) },
			"message " + mid(4).String() + " is in two ready FIFOs (again in key \"b\")"},
		{"ready ID in the wrong key", func(s *snapshotData) {
			s.fifo["a"] = []MsgID{mid(4)}
			s.fifo["b"] = append(s.fifo["b"], mid(1))
		}, "message " + mid(1).String() + " of key \"a\" is in the FIFO of key \"b\""},
		{"ready ID in no FIFO", func(s *snapshotData) { s.fifo["b"] = s.fifo["b"][:2] },
			"ready message " + mid(8).String() + " (key \"b\") is in no FIFO"},
		{"round key without ready messages", func(s *snapshotData) {
			c := s.keys[2]
			c.InRound = true
			s.keys = []KeySnapshot{s.keys[0], s.keys[1], c}
		}, "key \"c\" is in the round but has no ready message"},
		{"ready key out of the round", func(s *snapshotData) { s.keys[1].InRound = false },
			"key \"b\" has 3 ready messages but is not in the round"},
		{"unknown ID", func(s *snapshotData) { s.fifo["a"] = append(s.fifo["a"], mid(99)) },
			"message " + mid(99).String() + " in the FIFO of key \"a\" is not stored"},
		{"delayed ID in a FIFO", func(s *snapshotData) { s.fifo["a"] = append(s.fifo["a"], mid(6)) },
			"message " + mid(6).String() + " in the FIFO of key \"a\" is delayed, not ready"},
		{"duplicate message", func(s *snapshotData) { s.msgs = append(s.msgs, s.msgs[0]) },
			"duplicate message ID: " + mid(1).String()},
		{"message without a state", func(s *snapshotData) { s.msgs[0].State = StateUnknown },
			"message " + mid(1).String() + " has state unknown"},
		{"key twice", func(s *snapshotData) { s.keys = append(s.keys, s.keys[0]) }, "key \"a\" given twice"},
		{"key missing", func(s *snapshotData) { s.keys = s.keys[:2] }, "key \"c\" is missing"},
		{"unknown key", func(s *snapshotData) { s.keys = append(s.keys, KeySnapshot{Name: "z", Weight: 1}) },
			"key \"z\" has no stored message"},
		{"round key after the others", func(s *snapshotData) { s.keys[0], s.keys[2] = s.keys[2], s.keys[0] },
			"key \"b\" of the round follows keys that are not in it"},
		{"deficit out of the round", func(s *snapshotData) { s.keys[2].Deficit = 1 },
			"key \"c\" is not in the round but has deficit 1"},
		{"zero weight", func(s *snapshotData) { s.keys[0].Weight = 0 }, "key \"a\" has weight 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := takeSnapshot(q)
			if _, err := s.restore(q.Config()); err != nil {
				t.Fatalf("the intact snapshot is refused: %v", err)
			}
			tc.corrupt(&s)
			_, err := s.restore(q.Config())
			if !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore = %v, want ErrInvalidSnapshot saying %q", err, tc.want)
			}
		})
	}
}

// A Restorer's first error sticks, and a used one refuses everything.
func TestRestorerIsUsedOnce(t *testing.T) {
	r, err := NewRestorer("q", DefaultConfig())
	must(t, err)
	if err := r.AddReady(mid(1)); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("AddReady before any key = %v", err)
	}
	if err := r.AddMessage(Message{ID: mid(1), State: StateReady}); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("the first error did not stick: %v", err)
	}
	r, err = NewRestorer("q", DefaultConfig())
	must(t, err)
	must(t, r.AddMessage(Message{ID: mid(1), State: StateReady}))
	must(t, r.AddKey(KeySnapshot{Name: DefaultFairnessKey, Weight: 1, InRound: true}))
	if err := r.AddMessage(Message{ID: mid(2), State: StateReady}); err == nil {
		t.Fatal("a message after the keys was accepted")
	}
	if _, err := NewRestorer("q", Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewRestorer(zero config) = %v", err)
	}
	r, err = NewRestorer("q", DefaultConfig())
	must(t, err)
	q, err := r.Queue()
	must(t, err)
	if q.Len() != 0 || q.Name() != "q" {
		t.Fatalf("empty restore: %d messages, name %q", q.Len(), q.Name())
	}
	if _, err := r.Queue(); err == nil {
		t.Fatal("a second Queue succeeded")
	}
}

// snapshot replaces the parent with replay(prefix) — a fresh queue that applied every command
// so far — and the shadow with a queue restored from its snapshot; both must be
// indistinguishable. They get the model's subscriptions with the same credit (a spent one is
// dropped: Subscribe cannot make a subscription without credit) and go on in lockstep.
func (s *sim) snapshot(t *rapid.T) {
	replay, err := NewQueue(s.parent.name, DefaultConfig())
	must(t, err)
	for i, c := range s.parentCmds {
		if err := replay.Apply(c); err != nil {
			t.Fatalf("replaying command %d %#v: %v", i, c, err)
		}
	}
	restored := restore(t, replay)
	checkSameQueue(t, replay, restored, s.now)
	for _, name := range slices.Sorted(maps.Keys(s.credit)) {
		c := s.credit[name]
		if c == 0 {
			delete(s.credit, name)
			continue
		}
		must(t, replay.Subscribe(name, uint32(max(c, 0))))
		must(t, restored.Subscribe(name, uint32(max(c, 0))))
	}
	s.parent, s.shadow = replay, restored
	if replay.Len() > 0 {
		simCoverage.restored++
	}
}

// Restoring a snapshot of replay(prefix) gives a queue indistinguishable from replay(prefix):
// the same messages, stats, keys, FIFOs, wake-up and expiries, and — with the same
// subscriptions — the same deliveries and states for the rest of the random sequence.
func TestPropertyRestoreMatchesReplay(t *testing.T) {
	before := simCoverage.restored
	rapid.Check(t, func(t *rapid.T) {
		s := newSim(t)
		actions := s.actions()
		actions["snapshot"] = s.snapshot
		for range 5 {
			t.Repeat(actions)
		}
		s.checkReplay(t)
	})
	if simCoverage.restored == before {
		t.Error("no snapshot of a non-empty queue was restored")
	}
}
