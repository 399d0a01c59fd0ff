package engine

import (
	"flag"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// explain explains mid(n) at now, failing when it is not stored.
func explain(t *testing.T, q *Queue, n uint64, now int64) Explanation {
	t.Helper()
	e, ok := q.Explain(mid(n), now)
	if !ok {
		t.Fatalf("Explain(%d): not stored", n)
	}
	return e
}

// wantBlockers checks an explanation's state and blockers exactly.
func wantBlockers(t *testing.T, e Explanation, state string, want ...Blocker) {
	t.Helper()
	if e.State != state {
		t.Errorf("state %q, want %q", e.State, state)
	}
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(e.Blockers, want) {
		t.Errorf("blockers\n got %+v\nwant %+v", e.Blockers, want)
	}
	if e.DeliverableNow != (len(want) == 0) {
		t.Errorf("deliverable now %v with blockers %+v", e.DeliverableNow, e.Blockers)
	}
}

func TestExplainDelayed(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	m := msg(1, "a", 1)
	m.NotBefore = 5_000
	enqueue(t, q, 1_000, m)
	wantBlockers(t, explain(t, q, 1, 2_000), "delayed", Blocker{Reason: ReasonDelayed, Until: 5_000})
	wantBlockers(t, explain(t, q, 1, 5_000), "ready") // due: promoted, and first in line
	if ls := q.Dispatch(5_000, 1, nil); len(ls) != 1 || ls[0].ID != mid(1) {
		t.Fatalf("dispatch after the delay: %+v", ls)
	}
}

func TestExplainLeased(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxAttempts = 4
	q := newTestQueue(t, cfg)
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1_000, msg(1, "a", 1))
	q.Dispatch(1_000, 1, nil)
	wantBlockers(t, explain(t, q, 1, 2_000), "leased", Blocker{Reason: ReasonLeased, Until: 31_000, Consumer: "c",
		LeasedAt: 1_000, Attempt: 1, MaxAttempts: 4})
}

func TestExplainOrdering(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	for n := uint64(1); n <= 3; n++ {
		m := msg(n, "a", 1)
		m.Grouped, m.Group = true, "order-7"
		enqueue(t, q, 1_000, m)
	}
	q.Dispatch(1_000, 1, nil)
	wantBlockers(t, explain(t, q, 3, 1_000), "waiting",
		Blocker{Reason: ReasonOrdering, Group: "order-7", Head: mid(1), HeadState: "leased", Ahead: 2})
}

func TestExplainThrottled(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	adm := newGapAdmission()
	adm.gap["x"] = 10_000
	q.SetAdmission(adm)
	enqueue(t, q, 1_000, classed(1, "a", "x"), classed(2, "a", "x"), classed(3, "a", "x"))
	if ls := q.Dispatch(1_000, 10, nil); len(ls) != 1 {
		t.Fatalf("one delivery through the gap, got %d", len(ls))
	}
	wantBlockers(t, explain(t, q, 3, 2_000), "throttled", Blocker{Reason: ReasonThrottled, Class: "x", Until: 11_000, Ahead: 1})
}

func TestExplainFairness(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Quantum = 2
	q := newTestQueue(t, cfg)
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1_000, msg(1, "a", 3), msg(2, "b", 1), msg(3, "c", 1))
	for n := uint64(4); n <= 20; n += 3 {
		enqueue(t, q, 1_000, msg(n, "a", 3), msg(n+1, "b", 1), msg(n+2, "c", 1))
	}
	// a has 7 ready (turn: 3×2 = 6), b has 7 (turn: 2): c waits behind 2 keys and 8 deliveries.
	wantBlockers(t, explain(t, q, 3, 1_000), "ready",
		Blocker{Reason: ReasonFairness, KeysAhead: 2, DeliveriesAhead: 8, Weight: 1, Quantum: 2})
	q.Dispatch(1_000, 1, nil) // a's turn begins: 5 left in it
	wantBlockers(t, explain(t, q, 3, 1_000), "ready",
		Blocker{Reason: ReasonFairness, KeysAhead: 2, DeliveriesAhead: 7, Weight: 1, Quantum: 2})
	if ls := q.Dispatch(1_000, 7, nil); keysOf(t, q, ls)[6] != "b" {
		t.Fatalf("the 7 deliveries ahead: %v", keysOf(t, q, ls))
	}
	wantBlockers(t, explain(t, q, 3, 1_000), "ready")
	if ls := q.Dispatch(1_000, 1, nil); ls[0].ID != mid(3) {
		t.Fatalf("next: %v", ls[0].ID)
	}
}

func TestExplainKeyBacklog(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1_000, msg(1, "a", 1), msg(2, "a", 1), msg(3, "a", 1), msg(4, "b", 1))
	wantBlockers(t, explain(t, q, 3, 1_000), "ready", Blocker{Reason: ReasonKeyBacklog, Ahead: 2})
	wantBlockers(t, explain(t, q, 2, 1_000), "ready", Blocker{Reason: ReasonKeyBacklog, Ahead: 1})
	wantBlockers(t, explain(t, q, 1, 1_000), "ready")
}

func TestExplainParked(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	m := msg(1, "a", 1)
	m.Unclassified, m.ClassifyTries, m.LastError = true, 2, "on_enqueue: attempt to index a nil value"
	enqueue(t, q, 1_000, m)
	wantBlockers(t, explain(t, q, 1, 1_000), "parked",
		Blocker{Reason: ReasonParked, Error: "on_enqueue: attempt to index a nil value", Tries: 2})
}

func TestExplainReclaimHold(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1_000, msg(1, "a", 1))
	q.Hold(1_000, 6_000)
	wantBlockers(t, explain(t, q, 1, 2_000), "held", Blocker{Reason: ReasonReclaimHold, Until: 6_000})
	wantBlockers(t, explain(t, q, 1, 6_000), "ready")
}

func TestExplainNoSubscriberNoCredit(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	enqueue(t, q, 1_000, msg(1, "a", 1), msg(2, "a", 1))
	wantBlockers(t, explain(t, q, 1, 1_000), "ready", Blocker{Reason: ReasonNoSubscriber})
	must(t, q.Subscribe("c", 1))
	q.Dispatch(1_000, 10, nil)
	wantBlockers(t, explain(t, q, 2, 1_000), "ready", Blocker{Reason: ReasonNoCredit})
	// A delayed message names both what it waits for and that nobody could take it.
	m := msg(3, "b", 1)
	m.NotBefore = 9_000
	enqueue(t, q, 1_000, m)
	wantBlockers(t, explain(t, q, 3, 1_000), "delayed", Blocker{Reason: ReasonDelayed, Until: 9_000}, Blocker{Reason: ReasonNoCredit})
	if _, ok := q.Explain(mid(99), 1_000); ok {
		t.Fatal("an unknown ID is explained")
	}
}

func TestExplainKey(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Quantum = 2
	q := newTestQueue(t, cfg)
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1_000, msg(1, "a", 3), msg(2, "b", 1), msg(3, "a", 3), msg(4, "b", 1))
	d := msg(5, "b", 1)
	d.NotBefore = 50_000
	enqueue(t, q, 1_000, d)
	q.Dispatch(1_000, 1, nil) // a: 1 leased, deficit 5
	e, ok := q.ExplainKey("b", 2_000)
	if !ok {
		t.Fatal("key b not found")
	}
	want := KeyExplanation{Key: "b", Stored: 3, Backlog: 3, Ready: 2, Weight: 1, Quantum: 2, InRound: true, RoundKeys: 2,
		KeysAhead: 1, DeliveriesAhead: 1, QueueDeliveriesLastMinute: 1, WeightedShare: 0.25,
		Blockers: []Blocker{
			{Reason: ReasonFairness, KeysAhead: 1, DeliveriesAhead: 1, Weight: 1, Quantum: 2, Count: 2},
			{Reason: ReasonDelayed, Until: 50_000, Count: 1},
		}}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("ExplainKey(b)\n got %+v\nwant %+v", e, want)
	}
	a, _ := q.ExplainKey("a", 2_000)
	if !a.HasTurn || a.Deficit != 5 || a.InFlight != 1 || a.Backlog != 1 || a.DeliveriesLastMinute != 1 || a.WeightedShare != 0.75 || len(a.Blockers) != 0 {
		t.Fatalf("ExplainKey(a): %+v", a)
	}
	if _, ok := q.ExplainKey("nobody", 2_000); ok {
		t.Fatal("an unknown key is explained")
	}
}

// TestExplainPredictsDispatch: over random histories (enqueues with keys, weights, delays and
// ordering groups; dispatches; acks; retries; holds; subscriptions and credit; an Admission
// that admits everything or none), a message explained as deliverable now is the first the
// next Dispatch at that time delivers, and a message explained as not deliverable is not.
func TestExplainPredictsDispatch(t *testing.T) {
	var delivered, blocked int
	defer func() {
		t.Logf("%d cases delivered what was explained deliverable, %d delivered nothing", delivered, blocked)
		if delivered == 0 || blocked == 0 {
			t.Errorf("vacuous: %d cases delivered, %d did not", delivered, blocked)
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.Quantum = uint32(rapid.IntRange(1, 3).Draw(t, "quantum"))
		q := newTestQueue(t, cfg)
		if rapid.Bool().Draw(t, "admitAll") {
			q.SetAdmission(admitAll{})
		}
		now, next := int64(1_000), uint64(1)
		var ids []MsgID
		subs := 0
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 8).Draw(t, "op") {
			case 0, 1:
				m := msg(next, fmt.Sprint("k", rapid.IntRange(0, 4).Draw(t, "key")), uint32(rapid.IntRange(1, 3).Draw(t, "w")))
				if rapid.IntRange(0, 3).Draw(t, "delayed") == 0 {
					m.NotBefore = now + int64(rapid.IntRange(1, 3000).Draw(t, "delay"))
				}
				if g := rapid.IntRange(0, 3).Draw(t, "group"); g > 0 {
					m.Grouped, m.Group = true, fmt.Sprint("g", g)
				}
				enqueue(t, q, now, m)
				ids = append(ids, m.ID)
				next++
			case 2:
				q.Dispatch(now, rapid.IntRange(1, 4).Draw(t, "max"), nil)
			case 3:
				if len(ids) > 0 {
					id := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "ack")]
					if m, ok := q.Get(id); ok && m.State == StateLeased {
						must(t, q.ApplyAck(Ack{ID: id, At: now}))
					}
				}
			case 4:
				if len(ids) > 0 {
					id := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "nack")]
					if m, ok := q.Get(id); ok && m.State == StateLeased {
						_, err := q.ApplyFail(Fail{ID: id, At: now, NotBefore: now + int64(rapid.IntRange(0, 2000).Draw(t, "retry")), Attempts: m.Attempts})
						must(t, err)
					}
				}
			case 5:
				now += int64(rapid.IntRange(0, 1500).Draw(t, "tick"))
			case 6:
				c := fmt.Sprint("c", subs)
				subs++
				must(t, q.Subscribe(c, uint32(rapid.IntRange(0, 3).Draw(t, "credit"))))
			case 7:
				if subs > 0 {
					_ = q.AddCredit(fmt.Sprint("c", rapid.IntRange(0, subs-1).Draw(t, "sub")), 1)
				}
			case 8:
				if rapid.IntRange(0, 3).Draw(t, "hold") == 0 {
					q.Hold(now, now+int64(rapid.IntRange(0, 2000).Draw(t, "grace")))
				}
			}
		}
		leased := map[string]uint32{}
		for m := range q.Messages() {
			if m.State == StateLeased {
				leased[m.FairnessKey]++
			}
		}
		perKey := q.leasedPerKey()
		for i := range q.keys {
			if ks := &q.keys[i]; ks.refs > 0 && leasedOf(perKey, uint32(i)) != leased[ks.name] {
				t.Fatalf("key %s counts %d leased, holds %d", ks.name, leasedOf(perKey, uint32(i)), leased[ks.name])
			}
		}
		deliverable := MsgID{}
		found := 0
		for _, id := range ids {
			e, ok := q.Explain(id, now)
			if !ok {
				continue
			}
			if e.DeliverableNow {
				deliverable = id
				found++
			}
		}
		if found > 1 {
			t.Fatalf("%d messages deliverable now", found)
		}
		ls := q.Dispatch(now, 1, nil)
		switch {
		case found == 1 && (len(ls) != 1 || ls[0].ID != deliverable):
			t.Fatalf("explained %v as deliverable now, Dispatch delivered %+v", deliverable, ls)
		case found == 0 && len(ls) != 0:
			e, _ := q.Explain(ls[0].ID, now)
			t.Fatalf("nothing explained as deliverable, Dispatch delivered %v (%+v)", ls[0].ID, e)
		case found == 1:
			delivered++
		default:
			blocked++
		}
	})
}

var explainMessages = flag.Int("explain-messages", 1_000_000, "the messages of BenchmarkExplain's and BenchmarkExplainKey's queue")

// Explain of the message in the middle of a queue of -explain-messages messages (1 M by default;
// 10 M takes about 1 GB) on one fairness key (the longest walk along its FIFO, stopped at
// explainWalk from either end), and on 1,000 and 100,000 keys, explaining a message of the key
// last in the DRR round (a walk along the round).
func BenchmarkExplain(b *testing.B) {
	for _, nk := range []int{1, 1000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d/keys=%d", *explainMessages, nk), func(b *testing.B) {
			q := newTestQueue(b, benchConfig())
			must(b, q.Subscribe("c", 0))
			keys := keyNames(nk)
			n := *explainMessages
			fill(b, q, keys, 0, n)
			target := mid(uint64(n/2/nk*nk + nk - 1)) // the middle of the FIFO of the key last in the round
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, ok := q.Explain(target, 2); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
}

func BenchmarkExplainKey(b *testing.B) {
	q := newTestQueue(b, benchConfig())
	must(b, q.Subscribe("c", 0))
	keys := keyNames(10_000)
	fill(b, q, keys, 0, *explainMessages)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, ok := q.ExplainKey(keys[len(keys)-1], 2); !ok {
			b.Fatal("not found")
		}
	}
}
