package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewQueueRejectsInvalidConfig(t *testing.T) {
	if _, err := NewQueue("q", Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewQueue(zero config) = %v, want ErrInvalidConfig", err)
	}
}

func TestEnqueueReadyAndDelayed(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	enqueue(t, q, 1000,
		Message{ID: mid(1)},
		Message{ID: mid(2), NotBefore: 1000, FairnessKey: "k", Weight: 3, EnqueuedAt: 900},
		Message{ID: mid(3), NotBefore: 1001},
	)
	want := []Message{
		{ID: mid(1), Queue: "q", FairnessKey: "default", Weight: 1, EnqueuedAt: 1000, State: StateReady},
		{ID: mid(2), Queue: "q", FairnessKey: "k", Weight: 3, EnqueuedAt: 900, NotBefore: 1000, State: StateReady},
		{ID: mid(3), Queue: "q", FairnessKey: "default", Weight: 1, EnqueuedAt: 1000, NotBefore: 1001, State: StateDelayed},
	}
	for _, w := range want {
		got, ok := q.Get(w.ID)
		if !ok {
			t.Fatalf("Get(%v) missing", w.ID)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("Get(%v) (-want +got):\n%s", w.ID, diff)
		}
	}
	s := q.Stats()
	if s.Depth != 3 || s.Delayed != 1 || s.InFlight != 0 || s.ActiveFairnessKeys != 2 {
		t.Errorf("Stats = %+v", s)
	}
	if _, ok := q.Get(mid(4)); ok {
		t.Error("Get of an unknown ID succeeded")
	}
	if at, ok := q.NextWakeup(); !ok || at != 1001 {
		t.Errorf("NextWakeup = %d %v, want 1001", at, ok)
	}
	if q.Name() != "q" {
		t.Errorf("Name = %q", q.Name())
	}
	must(t, checkInvariants(q))
}

func TestEnqueueDuplicateRefusedWholly(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	enqueue(t, q, 0, msg(1, "a", 1))
	for _, batch := range [][]Message{
		{msg(2, "b", 1), msg(1, "a", 1)},                 // already stored
		{msg(2, "b", 1), msg(2, "b", 1)},                 // repeated, pair
		{msg(2, "b", 1), msg(3, "c", 1), msg(2, "b", 1)}, // repeated, sorted path
	} {
		if err := q.ApplyEnqueue(Enqueue{Msgs: batch}); !errors.Is(err, ErrDuplicateID) {
			t.Errorf("ApplyEnqueue(%v) = %v, want ErrDuplicateID", batch, err)
		}
	}
	if q.Len() != 1 || len(q.Stats().Keys) != 1 {
		t.Fatalf("refused enqueues changed the queue: %d messages, %+v", q.Len(), q.Stats())
	}
	must(t, checkInvariants(q))
}

func TestBodiesAreKeptAndOptional(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	h := map[string]string{"a": "b"}
	p := []byte("payload")
	var msgs []Message
	for i := range uint64(40) { // crosses the growth of the first body chunk
		m := msg(i, "k", 1)
		if i%3 == 0 {
			m.Headers, m.Payload = h, p
		}
		msgs = append(msgs, m)
	}
	enqueue(t, q, 0, msgs...)
	for i := range uint64(40) {
		m, _ := q.Get(mid(i))
		if has := m.Headers != nil && string(m.Payload) == "payload"; has != (i%3 == 0) {
			t.Errorf("message %d: headers %v payload %q", i, m.Headers, m.Payload)
		}
	}
}

func TestDispatchLeasesAndPromotes(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1000, Message{ID: mid(1), NotBefore: 2000})
	if got := q.Dispatch(1999, 10, nil); len(got) != 0 {
		t.Fatalf("Dispatch before NotBefore delivered %v", got)
	}
	got := q.Dispatch(2000, 10, nil)
	want := []Lease{{ID: mid(1), Consumer: "c", LeasedAt: 2000, ExpiresAt: 32000}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Dispatch (-want +got):\n%s", diff)
	}
	m, _ := q.Get(mid(1))
	if m.State != StateLeased || m.Attempts != 1 || m.LeasedAt != 2000 || m.LeaseExpiresAt != 32000 || m.Consumer != "c" {
		t.Fatalf("leased message = %+v", m)
	}
	if s := q.Stats(); s.Depth != 0 || s.InFlight != 1 || s.Delayed != 0 {
		t.Fatalf("Stats = %+v", s)
	}
	if got := q.Dispatch(2000, 10, nil); len(got) != 0 {
		t.Fatalf("a leased message was delivered again: %v", got)
	}
	must(t, checkInvariants(q))
}

func TestApplyLeaseRefusals(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	enqueue(t, q, 0, Message{ID: mid(1)}, Message{ID: mid(2), NotBefore: 50})
	if err := q.ApplyLease(Lease{ID: mid(9), LeasedAt: 0}); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("lease unknown = %v", err)
	}
	if err := q.ApplyLease(Lease{ID: mid(2), LeasedAt: 49}); !errors.Is(err, ErrNotReady) {
		t.Errorf("lease delayed = %v", err)
	}
	must(t, q.ApplyLease(Lease{ID: mid(2), LeasedAt: 50, ExpiresAt: 60})) // promoted by the lease's time
	must(t, q.ApplyLease(Lease{ID: mid(1), LeasedAt: 50, ExpiresAt: 60})) // not the head of its key: fine
	if err := q.ApplyLease(Lease{ID: mid(1), LeasedAt: 50}); !errors.Is(err, ErrNotReady) {
		t.Errorf("lease leased = %v", err)
	}
	must(t, checkInvariants(q))
}

// Ack deletes a message in any state: leased on the leader, ready or delayed in the replay of a
// fast-durability queue, which never saw the lease. Only an unknown ID is refused.
func TestAckInEveryState(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "a", 1), msg(2, "a", 1), msg(3, "b", 1), Message{ID: mid(4), NotBefore: 50})
	q.Dispatch(0, 1, nil) // leases 1
	if err := q.ApplyAck(Ack{ID: mid(9)}); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("ack of an unknown message = %v", err)
	}
	for _, n := range []uint64{1, 3, 4} { // leased, ready (b leaves the round), delayed
		must(t, q.ApplyAck(Ack{ID: mid(n)}))
		if _, ok := q.Get(mid(n)); ok {
			t.Fatalf("acked message %d still stored", n)
		}
		must(t, checkInvariants(q))
	}
	if err := q.ApplyAck(Ack{ID: mid(1)}); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("second ack = %v", err)
	}
	if s := q.Stats(); q.Len() != 1 || s.ActiveFairnessKeys != 1 || s.Delayed != 0 {
		t.Fatalf("after the acks: len %d, %+v", q.Len(), s)
	}
	if _, ok := q.NextWakeup(); ok {
		t.Fatal("the acked delayed message still wakes the queue")
	}
}

func TestExtendAndExpiry(t *testing.T) {
	q := newTestQueue(t, DefaultConfig()) // visibility 30 s
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, Message{ID: mid(1)}, Message{ID: mid(2)})
	q.Dispatch(1000, 2, nil) // both expire at 31000
	if at, ok := q.NextWakeup(); !ok || at != 31000 {
		t.Fatalf("NextWakeup = %d %v, want 31000", at, ok)
	}
	ext, err := q.DecideExtend(mid(1), 20000, 100*MaxLeaseExtensionMs)
	must(t, err)
	if ext.ExpiresAt != 20000+MaxLeaseExtensionMs {
		t.Fatalf("extension not capped: %d", ext.ExpiresAt)
	}
	must(t, q.ApplyExtend(ext))
	if got := q.Expired(30999, nil); len(got) != 0 {
		t.Fatalf("Expired(30999) = %v", got)
	}
	if got := q.Expired(31000, nil); !cmp.Equal(got, []MsgID{mid(2)}) {
		t.Fatalf("Expired(31000) = %v, want [2]", got)
	}
	if err := q.CheckLease(mid(2), 31000); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("CheckLease of an ended lease = %v", err)
	}
	if _, err := q.DecideExtend(mid(2), 31000, 10); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("DecideExtend of an ended lease = %v", err)
	}
	must(t, q.CheckLease(mid(2), 30999))
	if err := q.ApplyExtend(Extend{ID: mid(3)}); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("extend unknown = %v", err)
	}
	if got := q.Expired(20000+MaxLeaseExtensionMs, nil); !cmp.Equal(got, []MsgID{mid(2), mid(1)}) {
		t.Fatalf("Expired = %v, want [2 1] (earliest first)", got)
	}
	must(t, checkInvariants(q))
}

func TestFailRetryThenRedeliver(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, Message{ID: mid(1)})
	q.Dispatch(0, 1, nil)
	m, err := q.ApplyFail(Fail{ID: mid(1), At: 10, Error: "boom", NotBefore: 500, Attempts: 1})
	must(t, err)
	if m.State != StateDelayed || m.LastError != "boom" || m.NotBefore != 500 || m.Attempts != 1 || m.Consumer != "" {
		t.Fatalf("failed message = %+v", m)
	}
	if s := q.Stats(); s.Depth != 1 || s.Delayed != 1 || s.InFlight != 0 {
		t.Fatalf("Stats = %+v", s)
	}
	if got := q.Dispatch(499, 1, nil); len(got) != 0 {
		t.Fatalf("retried before NotBefore: %v", got)
	}
	if got := q.Dispatch(500, 1, nil); len(got) != 1 {
		t.Fatalf("not retried at NotBefore")
	}
	m, _ = q.Get(mid(1))
	if m.Attempts != 2 || m.LastError != "boom" {
		t.Fatalf("redelivered message = %+v", m)
	}
	// An immediate retry (NotBefore at or before At) is ready at once, behind its key's FIFO.
	enqueue(t, q, 600, Message{ID: mid(2)})
	_, err = q.ApplyFail(Fail{ID: mid(1), At: 600, NotBefore: 600, Attempts: 2})
	must(t, err)
	if got := q.Dispatch(600, 2, nil); !cmp.Equal([]MsgID{got[0].ID, got[1].ID}, []MsgID{mid(2), mid(1)}) {
		t.Fatalf("order after immediate retry = %v", got)
	}
	if _, err := q.ApplyFail(Fail{ID: mid(3)}); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("fail unknown = %v", err)
	}
	must(t, checkInvariants(q))
}

// A fast-durability queue does not log leases: its replica or replay applies Fail to a message
// it holds as ready or delayed, and takes the attempt count from the command.
func TestFailWithoutLoggedLease(t *testing.T) {
	live := newTestQueue(t, DefaultConfig())
	replica := newTestQueue(t, DefaultConfig())
	must(t, live.Subscribe("c", 0))
	log := []Command{Enqueue{At: 0, Msgs: []Message{msg(1, "a", 1), msg(2, "a", 1), msg(3, "b", 1)}}}
	must(t, live.Apply(log[0]))
	live.Dispatch(0, 3, nil) // not logged
	for _, tc := range []struct {
		n     uint64
		retry *uint64
	}{{1, nil}, {2, new(uint64)}, {3, nil}} {
		f, err := live.DecideFailure(mid(tc.n), 10, "boom", tc.retry)
		must(t, err)
		if f.Attempts != 1 {
			t.Fatalf("DecideFailure(%d).Attempts = %d, want 1", tc.n, f.Attempts)
		}
		_, err = live.ApplyFail(f)
		must(t, err)
		log = append(log, f)
	}
	// 2 is ready again: the live queue leases and fails it a second time; the replica fails it
	// while it is ready. 1 and 3 wait for their retry: the replica fails 1 while delayed.
	live.Dispatch(10, 1, nil)
	f, err := live.DecideFailure(mid(2), 20, "again", nil)
	must(t, err)
	f1 := Fail{ID: mid(1), At: 20, Error: "expired", NotBefore: 5000, Attempts: 2}
	for _, c := range []Command{f, f1, Ack{ID: mid(3)}} {
		must(t, live.Apply(c))
		log = append(log, c)
	}
	for i, c := range log {
		if err := replica.Apply(c); err != nil {
			t.Fatalf("replica: command %d %#v: %v", i, c, err)
		}
	}
	for _, q := range []*Queue{live, replica} {
		for _, want := range []Message{
			{ID: mid(1), State: StateDelayed, NotBefore: 5000, Attempts: 2, LastError: "expired"},
			{ID: mid(2), State: StateDelayed, NotBefore: f.NotBefore, Attempts: 2, LastError: "again"},
		} {
			m, _ := q.Get(want.ID)
			if m.State != want.State || m.NotBefore != want.NotBefore || m.Attempts != want.Attempts || m.LastError != want.LastError {
				t.Errorf("%v: %+v, want %+v", want.ID, m, want)
			}
		}
		must(t, checkInvariants(q))
	}
	if diff := cmp.Diff(slices.Collect(live.Messages()), slices.Collect(replica.Messages())); diff != "" {
		t.Fatalf("replica differs (-live +replica):\n%s", diff)
	}
}

func TestFailDeadLetterRemoves(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, Message{ID: mid(1), FairnessKey: "k", Weight: 4, Headers: map[string]string{"h": "v"}})
	q.Dispatch(0, 1, nil)
	m, err := q.ApplyFail(Fail{ID: mid(1), At: 5, Error: "bad", DeadLetter: true, Attempts: 1})
	must(t, err)
	want := Message{ID: mid(1), Queue: "q", Headers: map[string]string{"h": "v"}, FairnessKey: "k", Weight: 4,
		Attempts: 1, LastError: "bad"}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Fatalf("dead-lettered message (-want +got):\n%s", diff)
	}
	if q.Len() != 0 || len(q.Stats().Keys) != 0 {
		t.Fatalf("dead-lettered message still stored")
	}
	must(t, checkInvariants(q))
}

func TestRemoveInEveryState(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "a", 1), msg(2, "a", 1), Message{ID: mid(3), NotBefore: 100})
	q.Dispatch(0, 1, nil) // leases 1
	for _, n := range []uint64{2, 3, 1} {
		m, err := q.ApplyRemove(Remove{ID: mid(n), At: 0})
		must(t, err)
		if m.ID != mid(n) || m.State != StateUnknown || m.Consumer != "" {
			t.Errorf("removed = %+v", m)
		}
		must(t, checkInvariants(q))
	}
	if _, err := q.ApplyRemove(Remove{ID: mid(1)}); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("second remove = %v", err)
	}
	if _, ok := q.NextWakeup(); ok || q.Len() != 0 {
		t.Fatalf("queue not empty after removing everything")
	}
}

func TestUpdateConfig(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	bad := DefaultConfig()
	bad.Quantum = 0
	if err := q.ApplyUpdateConfig(UpdateConfig{bad}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("invalid update = %v", err)
	}
	cfg := DefaultConfig()
	cfg.VisibilityTimeoutMs = 5
	must(t, q.Apply(UpdateConfig{cfg}))
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, Message{ID: mid(1)})
	if got := q.Dispatch(10, 1, nil); got[0].ExpiresAt != 15 {
		t.Fatalf("lease after update expires at %d, want 15", got[0].ExpiresAt)
	}
	if q.Config() != cfg {
		t.Fatalf("Config() = %+v", q.Config())
	}
}

func TestOldestAndMessagesInEnqueueOrder(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "b", 1), msg(2, "a", 1), Message{ID: mid(3), NotBefore: 9}, msg(4, "a", 1))
	q.Dispatch(0, 1, nil) // leases 1: still listed
	_, err := q.ApplyRemove(Remove{ID: mid(2)})
	must(t, err)
	enqueue(t, q, 1, msg(2, "a", 1)) // re-enqueued: goes to the end
	ids := func(ms []Message) (out []MsgID) {
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	if got := ids(q.Oldest(0, nil)); !cmp.Equal(got, []MsgID{mid(1), mid(3), mid(4), mid(2)}) {
		t.Fatalf("Oldest(all) = %v", got)
	}
	if got := ids(q.Oldest(2, nil)); !cmp.Equal(got, []MsgID{mid(1), mid(3)}) {
		t.Fatalf("Oldest(2) = %v", got)
	}
	var all []MsgID
	for m := range q.Messages() {
		all = append(all, m.ID)
		if len(all) == 3 {
			break
		}
	}
	if !cmp.Equal(all, []MsgID{mid(1), mid(3), mid(4)}) {
		t.Fatalf("Messages = %v", all)
	}
}

func TestStatsPerKey(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Quantum = 3
	q := newTestQueue(t, cfg)
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "b", 2), msg(2, "b", 2), msg(3, "a", 1), Message{ID: mid(4), FairnessKey: "z", NotBefore: 5})
	q.Dispatch(0, 1, nil) // b's turn: deficit 2×3 = 6, one spent
	got := q.Stats()
	want := Stats{
		Depth: 3, InFlight: 1, Delayed: 1, ActiveFairnessKeys: 2, ActiveConsumers: 1, Quantum: 3,
		Keys: []KeyStats{
			{Key: "a", Pending: 1, Weight: 1},
			{Key: "b", Pending: 1, Deficit: 5, Weight: 2},
			{Key: "z", Weight: 1},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Stats (-want +got):\n%s", diff)
	}
}

func TestDrainedQueueReleasesMemory(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	const n = 3 * chunkSize
	batch := make([]Message, 0, n)
	for i := range uint64(n) {
		batch = append(batch, Message{ID: mid(i), FairnessKey: string(rune('a' + i%7)), Payload: []byte{1}})
	}
	enqueue(t, q, 0, batch...)
	if len(q.slab.chunks) != 3 {
		t.Fatalf("%d chunks for %d messages", len(q.slab.chunks), n)
	}
	for _, l := range q.Dispatch(0, n, nil) {
		must(t, q.ApplyAck(Ack{ID: l.ID}))
	}
	if q.slab.chunks != nil || q.index.ord.chunks != nil || len(q.index.side.tab) > minIndexSize || len(q.keys) != 0 || len(q.leases) != 0 {
		t.Fatalf("drained queue keeps %d chunks, index %d chunks and %d buckets, %d keys, %d leases",
			len(q.slab.chunks), len(q.index.ord.chunks), len(q.index.side.tab), len(q.keys), len(q.leases))
	}
	must(t, checkInvariants(q))
}

// Apply, the replay entry point, handles every Command type.
func TestApplyHandlesEveryCommand(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	cfg := DefaultConfig()
	cfg.Quantum = 2
	for _, c := range []Command{
		Enqueue{At: 0, Msgs: []Message{msg(1, "a", 1), msg(2, "a", 1), msg(3, "a", 1)}},
		Lease{ID: mid(1), Consumer: "c", LeasedAt: 0, ExpiresAt: 10},
		Extend{ID: mid(1), ExpiresAt: 20},
		Fail{ID: mid(1), At: 5, Error: "e", NotBefore: 5, Attempts: 1},
		Ack{ID: mid(2)},
		Remove{ID: mid(3), At: 6},
		UpdateConfig{Config: cfg},
	} {
		if err := q.Apply(c); err != nil {
			t.Fatalf("Apply(%T): %v", c, err)
		}
	}
	m, _ := q.Get(mid(1))
	if q.Len() != 1 || m.State != StateReady || m.Attempts != 1 || m.LastError != "e" || q.Config() != cfg {
		t.Fatalf("after every command: %d stored, %+v, %+v", q.Len(), m, q.Config())
	}
}

func TestApplyUnknownCommand(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	if err := q.Apply(nil); err == nil {
		t.Fatal("Apply(nil) succeeded")
	}
}

func TestMsgIDString(t *testing.T) {
	id := MsgID{0x01, 0x8f, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8, 0x09}
	if got, want := id.String(), "018f3c4d-5e6f-7081-92a3-b4c5d6e7f809"; got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
	if StateLeased.String() != "leased" || State(9).String() != "State(9)" {
		t.Fatal("State.String")
	}
}
