package engine

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// backlog enqueues n messages for each of the keys, with their weights, interleaved by key.
func backlog(t testing.TB, q *Queue, n int, keys []string, weights []uint32) {
	t.Helper()
	var msgs []Message
	id := uint64(q.Len()) + 1_000_000
	for range n {
		for i, k := range keys {
			msgs = append(msgs, Message{ID: mid(id), FairnessKey: k, Weight: weights[i]})
			id++
		}
	}
	enqueue(t, q, 0, msgs...)
}

func TestDRRWeightedRounds(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	backlog(t, q, 10, []string{"a", "b", "c"}, []uint32{1, 2, 3})
	got := strings.Join(keysOf(t, q, q.Dispatch(0, 12, nil)), "")
	if want := "abbcccabbccc"; got != want {
		t.Fatalf("deliveries %s, want %s", got, want)
	}
}

func TestDRRQuantum(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Quantum = 2
	q := newTestQueue(t, cfg)
	must(t, q.Subscribe("c", 0))
	backlog(t, q, 10, []string{"a", "b"}, []uint32{1, 2})
	got := strings.Join(keysOf(t, q, q.Dispatch(0, 12, nil)), "")
	if want := "aabbbbaabbbb"; got != want {
		t.Fatalf("deliveries %s, want %s", got, want)
	}
}

func TestDRRTurnSurvivesDispatchBoundaries(t *testing.T) {
	one := func(step int) string {
		q := newTestQueue(t, DefaultConfig())
		must(t, q.Subscribe("c", 0))
		backlog(t, q, 20, []string{"a", "b", "c"}, []uint32{3, 1, 2})
		var out []string
		for len(out) < 36 {
			out = append(out, keysOf(t, q, q.Dispatch(0, step, nil))...)
		}
		return strings.Join(out[:36], "")
	}
	want := one(36)
	for _, step := range []int{1, 2, 5, 7} {
		if got := one(step); got != want {
			t.Errorf("step %d: %s, want %s", step, got, want)
		}
	}
}

func TestDRRIdleKeyLeavesAndResets(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 0, msg(1, "a", 5), msg(2, "b", 1), msg(3, "b", 1))
	// a's turn grants 5 but a has one message: it leaves the round and its deficit resets.
	if got := strings.Join(keysOf(t, q, q.Dispatch(0, 2, nil)), ""); got != "ab" {
		t.Fatalf("deliveries %s, want ab", got)
	}
	if s := q.Stats(); s.Keys[0].Key != "a" || s.Keys[0].Deficit != 0 || s.ActiveFairnessKeys != 1 {
		t.Fatalf("Stats = %+v", s)
	}
	// a rejoins at the end of the round, behind b.
	enqueue(t, q, 0, msg(4, "a", 5), msg(5, "a", 5))
	if got := strings.Join(keysOf(t, q, q.Dispatch(0, 3, nil)), ""); got != "baa" {
		t.Fatalf("deliveries %s, want baa", got)
	}
	must(t, checkInvariants(q))
}

func TestDRRWeightIsMostRecentlyEnqueued(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	backlog(t, q, 10, []string{"a", "b"}, []uint32{1, 1})
	enqueue(t, q, 0, msg(1, "a", 3)) // a's weight is now 3
	if got := strings.Join(keysOf(t, q, q.Dispatch(0, 8, nil)), ""); got != "aaabaaab" {
		t.Fatalf("deliveries %s, want aaabaaab", got)
	}
	if w := q.Stats().Keys[0].Weight; w != 3 {
		t.Fatalf("weight of a = %d", w)
	}
}

func TestNoDeliveryWithoutCredit(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	backlog(t, q, 10, []string{"a"}, []uint32{1})
	if got := q.Dispatch(0, 10, nil); len(got) != 0 {
		t.Fatalf("delivered without subscriptions: %v", got)
	}
	must(t, q.Subscribe("c", 2))
	if got := q.Dispatch(0, 10, nil); len(got) != 2 {
		t.Fatalf("credit 2 gave %d deliveries", len(got))
	}
	if c, unl, ok := q.Credit("c"); c != 0 || unl || !ok {
		t.Fatalf("Credit = %d %v %v", c, unl, ok)
	}
	if got := q.Dispatch(0, 10, nil); len(got) != 0 {
		t.Fatalf("delivered with credit 0: %v", got)
	}
	must(t, q.AddCredit("c", 3))
	if got := q.Dispatch(0, 10, nil); len(got) != 3 {
		t.Fatalf("credit 3 gave %d deliveries", len(got))
	}
	must(t, q.AddCredit("c", 1))
	must(t, q.Unsubscribe("c"))
	if got := q.Dispatch(0, 10, nil); len(got) != 0 {
		t.Fatalf("delivered after unsubscribe: %v", got)
	}
	if got := q.Dispatch(0, 0, nil); len(got) != 0 {
		t.Fatal("max 0 delivered")
	}
	must(t, checkInvariants(q))
}

func TestSubscriptionErrorsAndSaturation(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", math.MaxUint32-1))
	if err := q.Subscribe("c", 1); !errors.Is(err, ErrSubscriptionExists) {
		t.Errorf("double Subscribe = %v", err)
	}
	if err := q.AddCredit("x", 1); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Errorf("AddCredit unknown = %v", err)
	}
	if err := q.Unsubscribe("x"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Errorf("Unsubscribe unknown = %v", err)
	}
	must(t, q.AddCredit("c", 10))
	if c, _, _ := q.Credit("c"); c != math.MaxUint32 {
		t.Errorf("credit %d, want saturation at MaxUint32", c)
	}
	must(t, q.Subscribe("u", 0))
	must(t, q.AddCredit("u", 5))
	if c, unl, _ := q.Credit("u"); c != 0 || !unl {
		t.Errorf("unlimited subscription credit %d %v", c, unl)
	}
	if _, _, ok := q.Credit("x"); ok {
		t.Error("Credit of unknown subscription ok")
	}
	must(t, q.Unsubscribe("c"))
	must(t, q.Subscribe("d", 1)) // reuses the freed slot
	if s := q.Stats(); s.ActiveConsumers != 2 {
		t.Errorf("ActiveConsumers = %d", s.ActiveConsumers)
	}
	must(t, checkInvariants(q))
}

func TestSubscriptionsRotate(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	backlog(t, q, 20, []string{"a"}, []uint32{1})
	must(t, q.Subscribe("x", 0))
	must(t, q.Subscribe("y", 2))
	must(t, q.Subscribe("z", 0))
	var got []string
	for _, l := range q.Dispatch(0, 8, nil) {
		got = append(got, l.Consumer)
	}
	// y leaves the rotation when its credit is spent, and rejoins at the end with new credit.
	want := []string{"x", "y", "z", "x", "y", "z", "x", "z"}
	if !cmp.Equal(got, want) {
		t.Fatalf("consumers %v, want %v", got, want)
	}
	must(t, q.AddCredit("y", 1))
	got = got[:0]
	for _, l := range q.Dispatch(0, 3, nil) {
		got = append(got, l.Consumer)
	}
	if want := []string{"x", "z", "y"}; !cmp.Equal(got, want) {
		t.Fatalf("consumers %v, want %v", got, want)
	}
}

func TestDispatchAndAckDoNotAllocate(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	backlog(t, q, 2000, []string{"a", "b", "c", "d"}, []uint32{1, 2, 3, 4})
	dst := make([]Lease, 0, 64)
	var now int64
	allocs := testing.AllocsPerRun(100, func() {
		now++
		dst = q.Dispatch(now, 64, dst[:0])
		for _, l := range dst {
			if err := q.ApplyAck(Ack{ID: l.ID}); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Dispatch+Ack allocated %.1f times per run", allocs)
	}
}
