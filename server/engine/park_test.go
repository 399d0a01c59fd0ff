package engine

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// gapAdmission is a test Admission: the class of a message is its attribute "c" (or its fairness
// key without one); a class may be delivered once every gap[class] ms, and never to the
// consumers deny lists for it.
type gapAdmission struct {
	gap  map[string]int64
	deny map[string][]string
	next map[string]int64
	asks int
}

func newGapAdmission() *gapAdmission {
	return &gapAdmission{gap: map[string]int64{}, deny: map[string][]string{}, next: map[string]int64{}}
}

func (a *gapAdmission) Class(c Candidate) string {
	if v, ok := c.Attributes["c"]; ok {
		return v
	}
	return c.FairnessKey
}

func (a *gapAdmission) Admit(consumer, class string, now int64) (bool, int64) {
	a.asks++
	if slices.Contains(a.deny[class], consumer) {
		return false, now + 1_000_000
	}
	if at := a.next[class]; now < at {
		return false, at
	}
	if g := a.gap[class]; g > 0 {
		a.next[class] = now + g
	}
	return true, 0
}

func classed(n uint64, key, class string) Message {
	return Message{ID: mid(n), FairnessKey: key, Attributes: map[string]string{"c": class}}
}

// A class nobody admits is parked and never blocks another key, or another subscription.
func TestAdmissionNeverBlocks(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("x", 0))
	must(t, q.Subscribe("y", 0))
	backlog(t, q, 5, []string{"a", "b", "c"}, []uint32{2, 1, 1})
	adm := newGapAdmission()
	adm.deny["a"] = []string{"x", "y"}
	adm.deny["b"] = []string{"x"} // b only fits y (think: x's bucket for b is full)
	q.SetAdmission(adm)
	ls := q.Dispatch(0, 4, nil)
	if got := strings.Join(keysOf(t, q, ls), ""); got != "bcbc" {
		t.Fatalf("deliveries %s, want bcbc", got)
	}
	for i, l := range ls {
		if i%2 == 0 && l.Consumer != "y" {
			t.Fatalf("b delivered to %s", l.Consumer)
		}
	}
	if s := q.Stats(); s.Throttled != 5 || s.ActiveFairnessKeys != 2 {
		t.Fatalf("stats %+v: want the 5 messages of a throttled and a out of the round", s)
	}
	must(t, checkInvariants(q))
	delete(adm.deny, "a")
	q.WakeParked()
	got := keysOf(t, q, q.Dispatch(0, 100, nil))
	if n := strings.Count(strings.Join(got, ""), "a"); n != 5 || len(got) != 11 {
		t.Fatalf("after unblocking a: %v, want every a and the rest", got)
	}
	must(t, checkInvariants(q))
	if len(q.park.byClass) != 0 || q.Throttled() != 0 {
		t.Fatalf("parking not empty: %d classes, %d throttled", len(q.park.byClass), q.Throttled())
	}
}

// A slow class mixed into one key waits in its order; the fast class behind it goes at once; the
// slow one is asked about once per wake, not once per message.
func TestThrottledBacklogWaitsInOrderWithoutBlocking(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	adm := newGapAdmission()
	adm.gap["slow"] = 100
	q.SetAdmission(adm)
	var msgs []Message
	for i := range uint64(20) {
		class := "fast"
		if i%2 == 0 {
			class = "slow"
		}
		msgs = append(msgs, classed(i, "k", class))
	}
	enqueue(t, q, 0, msgs...)
	ls := q.Dispatch(0, 100, nil)
	if len(ls) != 11 || ls[0].ID != mid(0) {
		t.Fatalf("first dispatch delivered %d (first %v), want slow 0 and every fast", len(ls), ls[0].ID)
	}
	if q.Throttled() != 9 {
		t.Fatalf("throttled %d, want 9", q.Throttled())
	}
	if at, ok := q.NextWakeup(); !ok || at != 100 {
		t.Fatalf("NextWakeup %d %v, want 100", at, ok)
	}
	for i := uint64(2); i < 20; i += 2 {
		now := int64(i/2) * 100
		if ls := q.Dispatch(now-1, 100, nil); len(ls) != 0 {
			t.Fatalf("delivered %v before the slow class has room", ls)
		}
		asks := adm.asks
		ls := q.Dispatch(now, 100, nil)
		if len(ls) != 1 || ls[0].ID != mid(i) {
			t.Fatalf("at %d: %v, want slow message %d alone", now, ls, i)
		}
		if adm.asks-asks > 2 {
			t.Fatalf("at %d: %d admission asks for one wake", now, adm.asks-asks)
		}
		must(t, checkInvariants(q))
	}
	if q.Throttled() != 0 || len(q.park.byClass) != 0 {
		t.Fatalf("parking not empty at the end: %d", q.Throttled())
	}
}

// Unpark puts every parked message back, in order, so that snapshots see only FIFOs; removing a
// parked message or a probe leaves the parking consistent.
func TestUnparkAndRemoveParked(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	adm := newGapAdmission()
	adm.gap["slow"] = 1000
	q.SetAdmission(adm)
	for i := range uint64(6) {
		enqueue(t, q, 0, classed(i, "k", "slow"))
	}
	if ls := q.Dispatch(0, 10, nil); len(ls) != 1 {
		t.Fatalf("delivered %d, want 1", len(ls))
	}
	if _, err := q.ApplyRemove(Remove{ID: mid(3), At: 1}); err != nil {
		t.Fatal(err)
	}
	must(t, checkInvariants(q))
	q.wakeParked(1000) // message 1 is the class's probe, back in the FIFO
	must(t, checkInvariants(q))
	q.Unpark()
	must(t, checkInvariants(q))
	var order []MsgID
	for id := range q.ReadyOrder("k") {
		order = append(order, id)
	}
	if want := []MsgID{mid(1), mid(2), mid(4), mid(5)}; !slices.Equal(order, want) {
		t.Fatalf("ready order after Unpark %v, want %v", order, want)
	}
	if q.Throttled() != 0 {
		t.Fatal("throttled after Unpark")
	}
}

// Random enqueues (some in ordering groups), dispatches, acks, removals, subscriptions, snapshots
// (after Unpark) and time against gapAdmission:
// every delivery is one the admission allowed (at most one per gap per class), the structures
// stay consistent, and once time runs on with a subscription every class admits, everything is
// delivered: nothing parked is forgotten.
func TestParkingProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := newTestQueue(t, DefaultConfig())
		adm := newGapAdmission()
		classes := []string{"c0", "c1", "c2"}
		for _, c := range classes {
			adm.gap[c] = rapid.Int64Range(0, 50).Draw(t, "gap")
		}
		adm.deny["c1"] = []string{"x"}
		q.SetAdmission(adm)
		last := map[string]int64{}
		var now int64
		var id uint64
		leased := map[MsgID]bool{}
		check := func(ls []Lease) {
			for _, l := range ls {
				m, _ := q.Get(l.ID)
				c := m.Attributes["c"]
				if slices.Contains(adm.deny[c], l.Consumer) {
					t.Fatalf("%v of class %s delivered to %s", l.ID, c, l.Consumer)
				}
				if at, ok := last[c]; ok && now-at < adm.gap[c] {
					t.Fatalf("class %s delivered at %d and %d, gap %d", c, at, now, adm.gap[c])
				}
				last[c] = now
				leased[l.ID] = true
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"enqueue": func(t *rapid.T) {
				id++
				m := classed(id, rapid.SampledFrom([]string{"a", "b"}).Draw(t, "key"), rapid.SampledFrom(classes).Draw(t, "class"))
				if g := rapid.SampledFrom([]string{"", "g1", "g2"}).Draw(t, "group"); g != "" {
					m.Group, m.Grouped = g, true
				}
				enqueue(t, q, now, m)
			},
			"tick": func(t *rapid.T) { now += rapid.Int64Range(0, 60).Draw(t, "dt") },
			"dispatch": func(t *rapid.T) {
				check(q.Dispatch(now, rapid.IntRange(0, 5).Draw(t, "max"), nil))
			},
			"ack": func(t *rapid.T) {
				for l := range leased {
					must(t, q.ApplyAck(Ack{ID: l, At: now}))
					delete(leased, l)
					return
				}
			},
			"remove": func(t *rapid.T) {
				if id == 0 {
					return
				}
				victim := mid(rapid.Uint64Range(1, id).Draw(t, "victim"))
				if _, ok := q.Get(victim); ok {
					if _, err := q.ApplyRemove(Remove{ID: victim, At: now}); err != nil {
						t.Fatal(err)
					}
					delete(leased, victim)
				}
			},
			"subscribe": func(t *rapid.T) {
				name := rapid.SampledFrom([]string{"x", "y"}).Draw(t, "sub")
				if _, _, ok := q.Credit(name); ok {
					must(t, q.Unsubscribe(name))
					return
				}
				must(t, q.Subscribe(name, rapid.Uint32Range(0, 3).Draw(t, "credit")))
			},
			"credit": func(t *rapid.T) {
				name := rapid.SampledFrom([]string{"x", "y"}).Draw(t, "sub")
				_ = q.AddCredit(name, 1)
			},
			"snapshot": func(t *rapid.T) {
				q.Unpark() // as the broker does before a snapshot
				r, err := takeSnapshot(q).restore(q.Config())
				if err != nil {
					t.Fatalf("snapshot after Unpark: %v", err)
				}
				if !reflect.DeepEqual(slices.Collect(q.Messages()), slices.Collect(r.Messages())) {
					t.Fatal("the restored queue's messages differ")
				}
			},
			"": func(t *rapid.T) {
				if err := checkInvariants(q); err != nil {
					t.Fatal(err)
				}
			},
		})
		_ = q.Unsubscribe("y")
		must(t, q.Subscribe("y", 0))
		for range 10000 {
			if s := q.Stats(); s.Depth == 0 {
				break
			}
			now += 50
			check(q.Dispatch(now, 100, nil))
			for l := range leased { // free the ordering groups
				must(t, q.ApplyAck(Ack{ID: l, At: now}))
				delete(leased, l)
			}
		}
		if s := q.Stats(); s.Depth != 0 {
			t.Fatalf("%d messages never delivered (%d throttled)", s.Depth, s.Throttled)
		}
		must(t, checkInvariants(q))
	})
}

func TestParkedStateIsReportedAsReady(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	adm := newGapAdmission()
	adm.deny["slow"] = []string{"c"}
	q.SetAdmission(adm)
	enqueue(t, q, 0, classed(1, "k", "slow"))
	q.Dispatch(0, 1, nil)
	if m, _ := q.Get(mid(1)); m.State != StateReady || q.Throttled() != 1 {
		t.Fatalf("parked message state %v, throttled %d", m.State, q.Throttled())
	}
	if got := fmt.Sprint(stateText(stParked)); got != "throttled" {
		t.Fatal(got)
	}
	n := 0
	for class, c := range q.ParkedClasses() {
		if class != "slow" || c != 1 {
			t.Fatalf("parked class %q × %d", class, c)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d parked classes", n)
	}
}

// An ordered group whose head a throttle holds waits for it; other groups go on.
func TestThrottledHeadHoldsItsOrderingGroup(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	adm := newGapAdmission()
	adm.deny["slow"] = []string{"c"}
	q.SetAdmission(adm)
	grouped := func(n uint64, group, class string) Message {
		m := classed(n, "k", class)
		m.Group, m.Grouped = group, true
		return m
	}
	enqueue(t, q, 0, grouped(1, "g1", "slow"), grouped(2, "g1", "fast"), grouped(3, "g2", "fast"), grouped(4, "g2", "fast"))
	ls := q.Dispatch(0, 10, nil)
	if len(ls) != 1 || ls[0].ID != mid(3) {
		t.Fatalf("delivered %v, want only g2's head", ls)
	}
	if q.Throttled() != 1 {
		t.Fatalf("throttled %d, want g1's head", q.Throttled())
	}
	must(t, q.ApplyAck(Ack{ID: mid(3), At: 1}))
	if ls := q.Dispatch(1, 10, nil); len(ls) != 1 || ls[0].ID != mid(4) {
		t.Fatalf("after acking g2's head: %v, want g2's second message and nothing of g1", ls)
	}
	delete(adm.deny, "slow")
	q.WakeParked()
	if ls := q.Dispatch(2, 10, nil); len(ls) != 1 || ls[0].ID != mid(1) {
		t.Fatalf("after the throttle opened: %v, want g1's head alone", ls)
	}
	must(t, q.ApplyAck(Ack{ID: mid(1), At: 3}))
	if ls := q.Dispatch(3, 10, nil); len(ls) != 1 || ls[0].ID != mid(2) {
		t.Fatalf("after acking g1's head: %v", ls)
	}
	must(t, checkInvariants(q))
}

// admitAll is an Admission that admits everything (a throttle that never binds), with a class
// per fairness key.
type admitAll struct{}

func (admitAll) Class(c Candidate) string                  { return c.FairnessKey }
func (admitAll) Admit(string, string, int64) (bool, int64) { return true, 0 }

// BenchmarkDispatchAdmission is Dispatch and Ack over a backlog without an Admission and with one
// that admits everything: the engine's share of a throttle that never binds.
func BenchmarkDispatchAdmission(b *testing.B) {
	for _, adm := range []struct {
		name string
		a    Admission
	}{{"none", nil}, {"admit-all", admitAll{}}} {
		b.Run(adm.name, func(b *testing.B) {
			q := newTestQueue(b, benchConfig())
			must(b, q.Subscribe("c", 0))
			if adm.a != nil {
				q.SetAdmission(adm.a)
			}
			backlog(b, q, 25_000, []string{"a", "b", "c", "d"}, []uint32{1, 1, 1, 1})
			dst := make([]Lease, 0, 64)
			var now int64
			b.ReportAllocs()
			for b.Loop() {
				now++
				dst = q.Dispatch(now, 1, dst[:0])
				if len(dst) == 0 {
					b.StopTimer()
					backlog(b, q, 25_000, []string{"a", "b", "c", "d"}, []uint32{1, 1, 1, 1})
					b.StartTimer()
					continue
				}
				must(b, q.ApplyAck(Ack{ID: dst[0].ID, At: now}))
			}
		})
	}
}
