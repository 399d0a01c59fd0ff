package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// checkGroups verifies the ordering groups: every group's list holds its members in enqueue
// order, only the head is anywhere but waiting (unless ordering is off), the flags and counts
// agree.
func (q *Queue) checkGroups() error {
	g := &q.groups
	grouped, leased := 0, 0
	for slot := q.ohead; slot != nilIdx; slot = q.slab.at(slot).onext {
		r := q.slab.at(slot)
		if r.meta&metaGrouped == 0 {
			if r.state() == stWaiting {
				return fmt.Errorf("ungrouped slot %d is waiting", slot)
			}
			continue
		}
		grouped++
		if r.state() == stLeased {
			leased++
		}
	}
	members := 0
	for name, gi := range g.idx {
		gs := &g.list[gi]
		if gs.name != name || gs.n == 0 {
			return fmt.Errorf("group %q at %d is %q with %d members", name, gi, gs.name, gs.n)
		}
		var n uint32
		prev := nilIdx
		for slot := gs.head; slot != nilIdx; slot = g.link(slot).next {
			l := g.link(slot)
			r := q.slab.at(slot)
			switch {
			case l.group != gi || l.prev != prev || r.meta&metaGrouped == 0:
				return fmt.Errorf("group %q broken at slot %d", name, slot)
			case prev != nilIdx && !q.orderedBefore(prev, slot):
				return fmt.Errorf("group %q not in enqueue order at slot %d", name, slot)
			case !g.off && slot == gs.head && r.state() == stWaiting:
				return fmt.Errorf("group %q: its head is waiting", name)
			case !g.off && slot != gs.head && r.state() != stWaiting:
				return fmt.Errorf("group %q: slot %d behind the head is %s", name, slot, stateText(r.state()))
			case g.off && r.state() == stWaiting:
				return fmt.Errorf("group %q: slot %d waits with ordering off", name, slot)
			}
			prev = slot
			n++
		}
		if n != gs.n || prev != gs.tail {
			return fmt.Errorf("group %q: %d members, counted %d", name, gs.n, n)
		}
		members += int(n)
	}
	if members != grouped {
		return fmt.Errorf("%d grouped messages, %d in groups", grouped, members)
	}
	if !g.off && leased != g.leased {
		return fmt.Errorf("%d grouped messages leased, counted %d", leased, g.leased)
	}
	return nil
}

func gmsg(n uint64, group, key string) Message {
	return Message{ID: mid(n), FairnessKey: key, Group: group, Grouped: true}
}

// dispatchIDs dispatches up to max messages at now and returns their IDs.
func dispatchIDs(t *testing.T, q *Queue, now int64, max int) []MsgID {
	t.Helper()
	var ids []MsgID
	for _, l := range q.Dispatch(now, max, nil) {
		ids = append(ids, l.ID)
	}
	if err := checkInvariants(q); err != nil {
		t.Fatal(err)
	}
	return ids
}

func ids(ns ...uint64) []MsgID {
	out := make([]MsgID, len(ns))
	for i, n := range ns {
		out[i] = mid(n)
	}
	return out
}

func TestOrderingOneInFlightPerGroupAndGroupsIndependent(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1, gmsg(1, "a", ""), gmsg(2, "a", ""), gmsg(3, "b", ""), msg(4, "", 1), gmsg(5, "b", ""))
	if got, want := dispatchIDs(t, q, 1, 10), ids(1, 3, 4); !slices.Equal(got, want) {
		t.Fatalf("first dispatch %v, want %v", got, want)
	}
	if s := q.Stats(); s.OrderingGroups != 2 || s.BlockedGroups != 2 {
		t.Fatalf("stats %+v, want 2 groups, 2 blocked", s)
	}
	must(t, q.ApplyAck(Ack{ID: mid(3), At: 2}))
	if got, want := dispatchIDs(t, q, 2, 10), ids(5); !slices.Equal(got, want) {
		t.Fatalf("after acking b's head: %v, want %v", got, want)
	}
	must(t, q.ApplyAck(Ack{ID: mid(1), At: 3}))
	if got, want := dispatchIDs(t, q, 3, 10), ids(2); !slices.Equal(got, want) {
		t.Fatalf("after acking a's head: %v, want %v", got, want)
	}
	for _, n := range []uint64{2, 4, 5} {
		must(t, q.ApplyAck(Ack{ID: mid(n), At: 4}))
	}
	if s := q.Stats(); s.OrderingGroups != 0 || s.BlockedGroups != 0 || len(q.groups.list) != 0 || q.groups.links != nil {
		t.Fatalf("drained queue keeps groups: %+v, %d group records", s, len(q.groups.list))
	}
}

// Two messages of one group in one batch: only the first is ready; the second waits behind it,
// in no FIFO, until the first is gone. (The sequence TestPropertyOrderingGroups once shrank a
// failure to: "slot 1 behind the head is ready".)
func TestOrderingBatchInOneGroupReadiesOnlyItsHead(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1, gmsg(1, "g1", "x"), gmsg(2, "g1", "x"))
	if err := checkInvariants(q); err != nil {
		t.Fatal(err)
	}
	if got, want := dispatchIDs(t, q, 1, 10), ids(1); !slices.Equal(got, want) {
		t.Fatalf("dispatch %v, want only the head %v", got, want)
	}
	must(t, q.ApplyAck(Ack{ID: mid(1), At: 2}))
	if got, want := dispatchIDs(t, q, 2, 10), ids(2); !slices.Equal(got, want) {
		t.Fatalf("after acking the head: %v, want %v", got, want)
	}
}

func TestOrderingDelayedHeadHoldsGroup(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	head := gmsg(1, "a", "")
	head.NotBefore = 100
	enqueue(t, q, 1, head, gmsg(2, "a", ""), gmsg(3, "b", ""))
	if got, want := dispatchIDs(t, q, 50, 10), ids(3); !slices.Equal(got, want) {
		t.Fatalf("before the delay: %v, want %v", got, want)
	}
	if got, want := dispatchIDs(t, q, 100, 10), ids(1); !slices.Equal(got, want) {
		t.Fatalf("at the delay: %v, want %v", got, want)
	}
}

func TestOrderingRetriedHeadKeepsItsPlace(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1, gmsg(1, "a", ""), gmsg(2, "a", ""))
	dispatchIDs(t, q, 1, 10)
	f, err := q.DecideFailure(mid(1), 2, "boom", nil) // default backoff: retry after 1 s
	must(t, err)
	if _, err := q.ApplyFail(f); err != nil {
		t.Fatal(err)
	}
	if got := dispatchIDs(t, q, 500, 10); len(got) != 0 {
		t.Fatalf("during the retry delay: %v, want nothing", got)
	}
	if got, want := dispatchIDs(t, q, f.NotBefore, 10), ids(1); !slices.Equal(got, want) {
		t.Fatalf("after the retry delay: %v, want %v", got, want)
	}
	// Dead-lettering the head lets the next one go.
	f, err = q.DecideFailure(mid(1), f.NotBefore+1, "boom", nil)
	must(t, err)
	f.DeadLetter = true
	if _, err := q.ApplyFail(f); err != nil {
		t.Fatal(err)
	}
	if got, want := dispatchIDs(t, q, f.At, 10), ids(2); !slices.Equal(got, want) {
		t.Fatalf("after dead-lettering the head: %v, want %v", got, want)
	}
}

func TestOrderingNextHeadKeepsItsOwnDelay(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	second := gmsg(2, "a", "")
	second.NotBefore = 100
	enqueue(t, q, 1, gmsg(1, "a", ""), second)
	dispatchIDs(t, q, 1, 10)
	must(t, q.ApplyAck(Ack{ID: mid(1), At: 10}))
	if s := q.Stats(); s.Delayed != 1 {
		t.Fatalf("the new head is not delayed: %+v", s)
	}
	if got := dispatchIDs(t, q, 99, 10); len(got) != 0 {
		t.Fatalf("before its delay: %v", got)
	}
	if got, want := dispatchIDs(t, q, 100, 10), ids(2); !slices.Equal(got, want) {
		t.Fatalf("at its delay: %v, want %v", got, want)
	}
}

func TestOrderingDRRPicksAmongGroupHeads(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	// Key x has one group with three messages, key y three groups of one: x delivers its head,
	// then nothing until it is acked, while y's heads take their turns.
	enqueue(t, q, 1, gmsg(1, "g", "x"), gmsg(2, "g", "x"), gmsg(3, "g", "x"),
		gmsg(4, "h1", "y"), gmsg(5, "h2", "y"), gmsg(6, "h3", "y"))
	if got, want := dispatchIDs(t, q, 1, 10), ids(1, 4, 5, 6); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if s := q.Stats(); s.ActiveFairnessKeys != 0 {
		t.Fatalf("keys with nothing deliverable in the round: %+v", s)
	}
}

func TestOrderingRedriveJoinsTheTail(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1, gmsg(1, "a", ""), gmsg(2, "a", ""))
	dispatchIDs(t, q, 1, 1)
	f, err := q.DecideFailure(mid(1), 2, "boom", nil)
	must(t, err)
	f.DeadLetter = true
	dead, err := q.ApplyFail(f)
	must(t, err)
	dlq := newTestQueue(t, DefaultConfig())
	dlq.DisableOrdering()
	enqueue(t, dlq, 2, DeadLetterCopy(dead))
	if m, _ := dlq.Get(mid(1)); !m.Grouped || m.Group != "a" || m.State != StateReady {
		t.Fatalf("dead-lettered message %+v lost its group or waits", m)
	}
	if err := checkInvariants(dlq); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, 3, gmsg(3, "a", ""))
	moved, err := dlq.ApplyRemove(Remove{ID: mid(1), At: 4})
	must(t, err)
	enqueue(t, q, 4, RedriveCopy(moved))
	var order []MsgID
	for id := range q.GroupOrder("a") {
		order = append(order, id)
	}
	if want := ids(2, 3, 1); !slices.Equal(order, want) {
		t.Fatalf("group order %v, want %v", order, want)
	}
}

func TestOrderingRestoreKeepsGroups(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1, gmsg(1, "a", ""), gmsg(2, "a", ""), gmsg(3, "b", ""), gmsg(4, "b", ""), gmsg(5, "c", ""))
	dispatchIDs(t, q, 1, 1) // a's head leased
	r := restore(t, q)
	must(t, r.Subscribe("c", 0))
	if got, want := dispatchIDs(t, r, 2, 10), ids(3, 5); !slices.Equal(got, want) {
		t.Fatalf("restored queue delivers %v, want %v", got, want)
	}
	must(t, r.ApplyAck(Ack{ID: mid(1), At: 3}))
	if got, want := dispatchIDs(t, r, 3, 10), ids(2); !slices.Equal(got, want) {
		t.Fatalf("restored queue after the ack delivers %v, want %v", got, want)
	}
}

// orderSim drives an ordered queue with random operations and checks, at every lease, that every
// earlier message of the leased message's group has left the queue (acked or dead-lettered):
// hence first deliveries follow enqueue order and a group has at most one message in flight.
// It restarts the queue from a snapshot, and replays its command log into a fresh queue, at
// random points, and carries on with the copy.
type orderSim struct {
	q      *Queue
	base   *Queue    // the queue cmds apply to (never changed)
	cmds   []Command // applied to q since base
	now    int64
	next   uint64
	subs   []string
	groups map[string][]MsgID // enqueue order
	gone   map[MsgID]bool     // acked or dead-lettered
	leased map[MsgID]bool
	group  map[MsgID]string
	first  map[string][]MsgID // first deliveries, per group
}

func (s *orderSim) apply(t *rapid.T, c Command) {
	if err := s.q.Apply(c); err != nil {
		t.Fatalf("Apply(%#v): %v", c, err)
	}
	s.cmds = append(s.cmds, c)
}

func (s *orderSim) enqueue(t *rapid.T) {
	n := rapid.IntRange(1, 4).Draw(t, "n")
	c := Enqueue{At: s.now}
	for range n {
		s.next++
		m := Message{ID: mid(s.next), FairnessKey: rapid.SampledFrom([]string{"x", "y"}).Draw(t, "key")}
		if d := rapid.IntRange(0, 3).Draw(t, "delay"); d > 0 {
			m.NotBefore = s.now + int64(d)*7
		}
		if g := rapid.IntRange(0, 4).Draw(t, "group"); g > 0 {
			m.Group, m.Grouped = fmt.Sprint("g", g), true
			s.groups[m.Group] = append(s.groups[m.Group], m.ID)
			s.group[m.ID] = m.Group
		}
		c.Msgs = append(c.Msgs, m)
	}
	s.apply(t, c)
}

func (s *orderSim) dispatch(t *rapid.T) {
	leases := s.q.Dispatch(s.now, rapid.IntRange(1, 5).Draw(t, "max"), nil)
	for _, l := range leases {
		s.cmds = append(s.cmds, l)
		g, ok := s.group[l.ID]
		if !ok {
			s.leased[l.ID] = true
			continue
		}
		for _, id := range s.groups[g] {
			if id == l.ID {
				break
			}
			if !s.gone[id] {
				t.Fatalf("leased %v of group %s while %v before it is still stored (leased %v)", l.ID, g, id, s.leased[id])
			}
		}
		s.leased[l.ID] = true
		if f := s.first[g]; !slices.Contains(f, l.ID) {
			s.first[g] = append(f, l.ID)
		}
	}
}

func (s *orderSim) pickLeased(t *rapid.T) (MsgID, bool) {
	var ls []MsgID
	for id := range s.leased {
		ls = append(ls, id)
	}
	if len(ls) == 0 {
		return MsgID{}, false
	}
	slices.SortFunc(ls, func(a, b MsgID) int { return compareIDs(&a, &b) })
	return rapid.SampledFrom(ls).Draw(t, "leased"), true
}

func (s *orderSim) ack(t *rapid.T) {
	id, ok := s.pickLeased(t)
	if !ok {
		return
	}
	s.apply(t, Ack{ID: id, At: s.now})
	delete(s.leased, id)
	s.gone[id] = true
}

func (s *orderSim) fail(t *rapid.T, id MsgID, text string, retryAfter *uint64) {
	f, err := s.q.DecideFailure(id, s.now, text, retryAfter)
	if err != nil {
		t.Fatalf("DecideFailure(%v): %v", id, err)
	}
	f.DeadLetter = rapid.IntRange(0, 4).Draw(t, "dead") == 0
	s.apply(t, f)
	delete(s.leased, id)
	if f.DeadLetter {
		s.gone[id] = true
	}
}

func (s *orderSim) nack(t *rapid.T) {
	id, ok := s.pickLeased(t)
	if !ok {
		return
	}
	after := uint64(rapid.IntRange(0, 20).Draw(t, "retryAfter"))
	s.fail(t, id, "nack", &after)
}

func (s *orderSim) tick(t *rapid.T) {
	s.now += int64(rapid.IntRange(1, 40).Draw(t, "dt"))
	for _, id := range s.q.Expired(s.now, nil) {
		s.fail(t, id, "lease expired", nil)
	}
}

// restart replaces the queue by one restored from its snapshot, or by a replay of its log onto
// the queue it started from, checks that the copy is the same queue, and carries on with it.
func (s *orderSim) restart(t *rapid.T) {
	var copy *Queue
	if rapid.Bool().Draw(t, "replay") {
		copy = restore(t, s.base)
		for _, c := range s.cmds {
			if err := copy.Apply(c); err != nil {
				t.Fatalf("replay Apply(%#v): %v", c, err)
			}
		}
	} else {
		copy = restore(t, s.q)
	}
	if diff := cmp.Diff(slices.Collect(s.q.Messages()), slices.Collect(copy.Messages())); diff != "" {
		t.Fatalf("copy differs (-live +copy):\n%s", diff)
	}
	if diff := cmp.Diff(slices.Collect(s.q.SnapshotKeys()), slices.Collect(copy.SnapshotKeys())); diff != "" {
		t.Fatalf("copy's keys differ (-live +copy):\n%s", diff)
	}
	s.q, s.base, s.cmds = copy, restore(t, copy), nil
	for _, c := range s.subs {
		must(t, s.q.Subscribe(c, 0))
	}
}

func TestPropertyOrderingGroups(t *testing.T) {
	var restarts, firsts int
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.VisibilityTimeoutMs = 30
		cfg.Backoff, cfg.BackoffInitialMs = BackoffFixed, 5
		q := newTestQueue(t, cfg)
		s := &orderSim{q: q, base: newTestQueue(t, cfg), now: 1, subs: []string{"c1", "c2", "c3"}, groups: map[string][]MsgID{},
			gone: map[MsgID]bool{}, leased: map[MsgID]bool{}, group: map[MsgID]string{}, first: map[string][]MsgID{}}
		for _, c := range s.subs {
			must(t, q.Subscribe(c, 0))
		}
		t.Repeat(map[string]func(*rapid.T){
			"enqueue":  s.enqueue,
			"dispatch": s.dispatch,
			"ack":      s.ack,
			"nack":     s.nack,
			"tick":     s.tick,
			"restart": func(t *rapid.T) {
				if s.q.Len() > 0 {
					s.restart(t)
					restarts++
				}
			},
			"": func(t *rapid.T) {
				if err := checkInvariants(s.q); err != nil {
					t.Fatal(err)
				}
				perGroup := map[string]int{}
				for id := range s.leased {
					if g, ok := s.group[id]; ok {
						if perGroup[g]++; perGroup[g] > 1 {
							t.Fatalf("group %s has two messages in flight", g)
						}
					}
				}
			},
		})
		for g, first := range s.first {
			if want := s.groups[g][:len(first)]; !slices.Equal(first, want) {
				t.Fatalf("group %s first deliveries %v, enqueue order %v", g, first, want)
			}
			firsts += len(first)
		}
	})
	if restarts == 0 || firsts == 0 {
		t.Fatalf("vacuous: %d restarts, %d grouped first deliveries", restarts, firsts)
	}
}

// BenchmarkLifecycleGroups is BenchmarkLifecycle on one fairness key with the messages spread
// over ordering groups (groups=0: unordered), a standing backlog of 100,000 messages.
func BenchmarkLifecycleGroups(b *testing.B) {
	for _, ng := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("groups=%d", ng), func(b *testing.B) {
			names := make([]string, max(ng, 1))
			for i := range names {
				names[i] = fmt.Sprint("g", i)
			}
			at := func(n int) Message {
				m := Message{ID: mid(uint64(n))}
				if ng > 0 {
					m.Group, m.Grouped = names[n%ng], true
				}
				return m
			}
			q := newTestQueue(b, benchConfig())
			must(b, q.Subscribe("c", 0))
			const backlog = 100_000
			batch := make([]Message, 64)
			next := 0
			for next < backlog {
				for i := range batch {
					batch[i] = at(next)
					next++
				}
				enqueue(b, q, 1, batch...)
			}
			dst := make([]Lease, 0, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += len(dst) {
				for i := range batch {
					batch[i] = at(next)
					next++
				}
				enqueue(b, q, 2, batch...)
				dst = q.Dispatch(2, len(batch), dst[:0])
				for _, l := range dst {
					must(b, q.ApplyAck(Ack{ID: l.ID, At: 2}))
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// A hold (fast-durability takeover) holds group heads only; its release makes them ready again,
// and the messages behind them keep waiting.
func TestOrderingHoldHoldsHeads(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1, gmsg(1, "a", ""), gmsg(2, "a", ""), gmsg(3, "b", ""))
	q.Hold(1, 100)
	if err := checkInvariants(q); err != nil {
		t.Fatal(err)
	}
	if got := dispatchIDs(t, q, 50, 10); len(got) != 0 || q.Held() != 2 {
		t.Fatalf("during the hold: delivered %v, %d held; want nothing, 2 held", got, q.Held())
	}
	// An ExtendLease of a held head leases it; its group stays blocked.
	e, err := q.DecideExtend(mid(1), 60, 1000)
	must(t, err)
	e.Consumer = "c"
	must(t, q.ApplyExtend(e))
	if got, want := dispatchIDs(t, q, 100, 10), ids(3); !slices.Equal(got, want) {
		t.Fatalf("after the hold: %v, want %v", got, want)
	}
	if s := q.Stats(); s.BlockedGroups != 2 {
		t.Fatalf("stats %+v, want both groups blocked", s)
	}
}
