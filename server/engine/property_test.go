package engine

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// Where the model believes a message is.
type fate uint8

const (
	inParent fate = iota + 1
	inDLQ
	acked
	removed
)

// simCoverage counts events over all random cases, so that the test can tell if it became
// vacuous.
var simCoverage struct{ leased, failed, deadLettered, expired, redriven, restored int }

// sim drives a parent queue and its dead-letter queue the way the broker will, recording every
// applied command, and keeps a model of what must be true. Once snapshot has run, shadow is a
// queue restored from a snapshot, driven in lockstep with the parent and checked against it.
type sim struct {
	parent, dlq *Queue
	shadow      *Queue
	parentCmds  []Command
	dlqCmds     []Command
	now         int64
	nextID      uint64
	fate        map[MsgID]fate
	expiry      map[MsgID]int64  // model leases (both queues): expiry time
	credit      map[string]int64 // parent subscriptions; -1 = unlimited

}

func newSim(t *rapid.T) *sim {
	cfg := DefaultConfig()
	cfg.Alloc = testAlloc
	parent, err := NewQueue("q", cfg)
	if err != nil {
		t.Fatal(err)
	}
	dcfg := cfg
	dcfg.MaxAttempts = math.MaxUint32
	dlq, err := NewQueue("q.dlq", dcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := dlq.Subscribe("dlq-consumer", 0); err != nil {
		t.Fatal(err)
	}
	return &sim{parent: parent, dlq: dlq, fate: map[MsgID]fate{}, expiry: map[MsgID]int64{}, credit: map[string]int64{}}
}

func (s *sim) apply(t *rapid.T, q *Queue, c Command) {
	if err := q.Apply(c); err != nil {
		t.Fatalf("%s: Apply(%#v): %v", q.name, c, err)
	}
	if s.shadowing(q) {
		if err := s.shadow.Apply(c); err != nil {
			t.Fatalf("restored: Apply(%#v): %v", c, err)
		}
	}
	if q == s.parent {
		s.parentCmds = append(s.parentCmds, c)
	} else {
		s.dlqCmds = append(s.dlqCmds, c)
	}
}

// shadowing reports whether operations on q must be repeated on the shadow.
func (s *sim) shadowing(q *Queue) bool { return q == s.parent && s.shadow != nil }

// same fails unless the parent and the shadow gave the same answer.
func same(t *rapid.T, what string, live, restored any) {
	if !reflect.DeepEqual(live, restored) {
		t.Fatalf("%s: the restored queue differs (-live +restored):\n%s", what, cmp.Diff(live, restored))
	}
}

func (s *sim) leasedIn(f fate) []MsgID {
	var ids []MsgID
	for id := range s.expiry {
		if s.fate[id] == f {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b MsgID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

func (s *sim) stored(f fate) []MsgID {
	var ids []MsgID
	for id, g := range s.fate {
		if g == f {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b MsgID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

func (s *sim) enqueue(t *rapid.T) {
	n := rapid.IntRange(1, 4).Draw(t, "n")
	c := Enqueue{At: s.now}
	for range n {
		s.nextID++
		m := Message{
			ID:          mid(s.nextID),
			FairnessKey: rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "key"),
			Weight:      rapid.Uint32Range(0, 4).Draw(t, "weight"),
		}
		if rapid.Bool().Draw(t, "delayed") {
			m.NotBefore = s.now + rapid.Int64Range(0, 5000).Draw(t, "delay")
		}
		if rapid.Bool().Draw(t, "body") {
			m.Headers, m.Payload = map[string]string{"n": fmt.Sprint(s.nextID)}, []byte{byte(s.nextID)}
		}
		c.Msgs = append(c.Msgs, m)
		s.fate[m.ID] = inParent
	}
	s.apply(t, s.parent, c)
}

func (s *sim) dispatch(t *rapid.T, q *Queue, max int) {
	ls := q.Dispatch(s.now, max, nil)
	if s.shadowing(q) {
		same(t, "Dispatch", ls, s.shadow.Dispatch(s.now, max, nil))
	}
	for _, l := range ls {
		if _, ok := s.expiry[l.ID]; ok {
			t.Fatalf("%v delivered while leased", l.ID) // property 2
		}
		if q == s.parent {
			c := s.credit[l.Consumer]
			if c == 0 {
				t.Fatalf("delivery to %s, which has no credit", l.Consumer) // property 4
			}
			if c > 0 {
				s.credit[l.Consumer] = c - 1
			}
		}
		if l.LeasedAt != s.now || l.ExpiresAt != s.now+int64(q.cfg.VisibilityTimeoutMs) {
			t.Fatalf("lease times %+v at %d", l, s.now)
		}
		s.expiry[l.ID] = l.ExpiresAt
		simCoverage.leased++
		if q == s.parent {
			s.parentCmds = append(s.parentCmds, l)
		} else {
			s.dlqCmds = append(s.dlqCmds, l)
		}
	}
}

// fail runs the broker's failure path for a leased message of q.
func (s *sim) fail(t *rapid.T, q *Queue, id MsgID, errText string, retryAfter *uint64) {
	f, err := q.DecideFailure(id, s.now, errText, retryAfter)
	if err != nil {
		t.Fatalf("DecideFailure(%v): %v", id, err)
	}
	m, err := q.ApplyFail(f)
	if err != nil {
		t.Fatalf("ApplyFail(%v): %v", id, err)
	}
	if s.shadowing(q) {
		f2, err := s.shadow.DecideFailure(id, s.now, errText, retryAfter)
		m2, err2 := s.shadow.ApplyFail(f)
		if err != nil || err2 != nil {
			t.Fatalf("restored: failing %v: %v", id, errors.Join(err, err2))
		}
		same(t, "DecideFailure", f, f2)
		same(t, "ApplyFail", m, m2)
	}
	if q == s.parent {
		s.parentCmds = append(s.parentCmds, f)
	} else {
		s.dlqCmds = append(s.dlqCmds, f)
	}
	delete(s.expiry, id)
	simCoverage.failed++
	if f.DeadLetter {
		simCoverage.deadLettered++
		if q == s.dlq {
			t.Fatalf("the DLQ dead-lettered %v", id)
		}
		s.apply(t, s.dlq, Enqueue{At: s.now, Msgs: []Message{DeadLetterCopy(m)}})
		s.fate[id] = inDLQ
	}
}

func (s *sim) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"enqueue":      s.enqueue,
		"tick":         func(t *rapid.T) { s.now += rapid.Int64Range(0, 20000).Draw(t, "dt") },
		"subscribe":    s.subscribe,
		"unsubscribe":  s.unsubscribe,
		"addCredit":    s.addCredit,
		"dispatch":     func(t *rapid.T) { s.dispatch(t, s.parent, rapid.IntRange(0, 6).Draw(t, "max")) },
		"dispatchDLQ":  func(t *rapid.T) { s.dispatch(t, s.dlq, rapid.IntRange(0, 2).Draw(t, "max")) },
		"ack":          s.ack,
		"nack":         s.nack,
		"expire":       s.expire,
		"extend":       s.extend,
		"remove":       s.remove,
		"redrive":      s.redrive,
		"updateConfig": s.updateConfig,
		"":             s.check,
	}
}

func (s *sim) pickLeased(t *rapid.T, f fate) (MsgID, bool) {
	ids := s.leasedIn(f)
	if len(ids) == 0 {
		return MsgID{}, false
	}
	return rapid.SampledFrom(ids).Draw(t, "leased"), true
}

func (s *sim) pickSub(t *rapid.T) (string, bool) {
	subs := slices.Sorted(maps.Keys(s.credit))
	if len(subs) == 0 {
		return "", false
	}
	return rapid.SampledFrom(subs).Draw(t, "sub"), true
}

func (s *sim) subscribe(t *rapid.T) {
	name := fmt.Sprintf("c%d", rapid.IntRange(0, 3).Draw(t, "c"))
	credit := rapid.Uint32Range(0, 3).Draw(t, "credit")
	if _, ok := s.credit[name]; ok {
		t.Skip("subscribed")
	}
	if err := s.parent.Subscribe(name, credit); err != nil {
		t.Fatal(err)
	}
	if s.shadow != nil {
		must(t, s.shadow.Subscribe(name, credit))
	}
	s.credit[name] = int64(credit)
	if credit == 0 {
		s.credit[name] = -1
	}
}

func (s *sim) unsubscribe(t *rapid.T) {
	name, ok := s.pickSub(t)
	if !ok {
		t.Skip("none")
	}
	if err := s.parent.Unsubscribe(name); err != nil {
		t.Fatal(err)
	}
	if s.shadow != nil {
		must(t, s.shadow.Unsubscribe(name))
	}
	delete(s.credit, name)
}

func (s *sim) addCredit(t *rapid.T) {
	name, ok := s.pickSub(t)
	if !ok {
		t.Skip("none")
	}
	n := rapid.SampledFrom([]uint32{0, 1, 2, math.MaxUint32}).Draw(t, "n")
	if err := s.parent.AddCredit(name, n); err != nil {
		t.Fatal(err)
	}
	if s.shadow != nil {
		must(t, s.shadow.AddCredit(name, n))
	}
	if c := s.credit[name]; c >= 0 {
		s.credit[name] = min(c+int64(n), math.MaxUint32)
	}
}

func (s *sim) ack(t *rapid.T) {
	id, ok := s.pickLeased(t, inParent)
	if !ok {
		t.Skip("none leased")
	}
	err := s.parent.CheckLease(id, s.now)
	if s.shadow != nil {
		same(t, "CheckLease", err == nil, s.shadow.CheckLease(id, s.now) == nil)
	}
	if (err != nil) != (s.expiry[id] <= s.now) {
		t.Fatalf("CheckLease(%v) at %d, expiry %d: %v", id, s.now, s.expiry[id], err)
	}
	if err != nil {
		return
	}
	s.apply(t, s.parent, Ack{ID: id})
	delete(s.expiry, id)
	s.fate[id] = acked
}

func (s *sim) nack(t *rapid.T) {
	id, ok := s.pickLeased(t, inParent)
	if !ok || s.expiry[id] <= s.now {
		t.Skip("none leased")
	}
	var after *uint64
	if rapid.Bool().Draw(t, "retryAfter") {
		v := rapid.Uint64Range(0, 3000).Draw(t, "ms")
		after = &v
	}
	s.fail(t, s.parent, id, "nack", after)
}

// expire handles the expired leases of both queues, checking Expired against the model.
func (s *sim) expire(t *rapid.T) {
	for _, q := range []*Queue{s.parent, s.dlq} {
		got := q.Expired(s.now, nil)
		if s.shadowing(q) {
			same(t, "Expired", got, s.shadow.Expired(s.now, nil))
		}
		var want []MsgID
		for id, at := range s.expiry {
			if at <= s.now && (s.fate[id] == inParent) == (q == s.parent) {
				want = append(want, id)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: Expired = %v, model %v", q.name, got, want)
		}
		for _, id := range got {
			if s.expiry[id] > s.now {
				t.Fatalf("%s: %v not expired", q.name, id)
			}
			s.fail(t, q, id, "lease expired", nil)
			simCoverage.expired++
		}
	}
}

func (s *sim) extend(t *rapid.T) {
	id, ok := s.pickLeased(t, inParent)
	if !ok || s.expiry[id] <= s.now {
		t.Skip("none leased")
	}
	by := rapid.Uint64Range(0, 60000).Draw(t, "by")
	e, err := s.parent.DecideExtend(id, s.now, by)
	if err != nil {
		t.Fatal(err)
	}
	if s.shadow != nil {
		e2, err := s.shadow.DecideExtend(id, s.now, by)
		if err != nil {
			t.Fatalf("restored: DecideExtend(%v): %v", id, err)
		}
		same(t, "DecideExtend", e, e2)
	}
	s.apply(t, s.parent, e)
	s.expiry[id] = e.ExpiresAt
}

func (s *sim) remove(t *rapid.T) {
	ids := s.stored(inParent)
	if len(ids) == 0 {
		t.Skip("empty")
	}
	id := rapid.SampledFrom(ids).Draw(t, "id")
	s.apply(t, s.parent, Remove{ID: id, At: s.now})
	delete(s.expiry, id)
	s.fate[id] = removed
}

// redrive moves the oldest DLQ messages back to the parent, as the broker's Redrive does.
func (s *sim) redrive(t *rapid.T) {
	for _, m := range s.dlq.Oldest(rapid.IntRange(1, 3).Draw(t, "n"), nil) {
		r, err := s.dlq.ApplyRemove(Remove{ID: m.ID, At: s.now})
		if err != nil {
			t.Fatal(err)
		}
		s.dlqCmds = append(s.dlqCmds, Remove{ID: m.ID, At: s.now})
		s.apply(t, s.parent, Enqueue{At: s.now, Msgs: []Message{RedriveCopy(r)}})
		delete(s.expiry, m.ID)
		s.fate[m.ID] = inParent
		simCoverage.redriven++
	}
}

func (s *sim) updateConfig(t *rapid.T) {
	cfg := Config{
		VisibilityTimeoutMs: rapid.Uint64Range(1, 40000).Draw(t, "vis"),
		MaxAttempts:         rapid.Uint32Range(1, 4).Draw(t, "max"),
		Backoff:             rapid.SampledFrom([]Backoff{BackoffNone, BackoffFixed, BackoffExponential}).Draw(t, "backoff"),
		BackoffInitialMs:    rapid.Uint64Range(1, 1000).Draw(t, "initial"),
		Quantum:             rapid.Uint32Range(1, 3).Draw(t, "quantum"),
	}
	cfg.BackoffMaxMs = cfg.BackoffInitialMs * rapid.Uint64Range(1, 10).Draw(t, "maxFactor")
	s.apply(t, s.parent, UpdateConfig{cfg})
}

// check asserts the model after every step: nothing lost (property 3), leases as the model says
// (property 2), credit as the model says (property 4), and every internal invariant.
func (s *sim) check(t *rapid.T) {
	for _, q := range []*Queue{s.parent, s.dlq, s.shadow} {
		if q == nil {
			continue
		}
		if err := checkInvariants(q); err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
	}
	if s.shadow != nil {
		checkSameQueue(t, s.parent, s.shadow, s.now)
	}
	counts := map[fate]int{}
	inFlight := map[fate]int{}
	for id, f := range s.fate {
		counts[f]++
		mp, inP := s.parent.Get(id)
		md, inD := s.dlq.Get(id)
		if inP != (f == inParent) || inD != (f == inDLQ) {
			t.Fatalf("%v: model %d, in parent %v, in DLQ %v", id, f, inP, inD)
		}
		m := mp
		if inD {
			m = md
		}
		_, leased := s.expiry[id]
		if (inP || inD) && (m.State == StateLeased) != leased {
			t.Fatalf("%v: state %v, model leased %v", id, m.State, leased)
		}
		if leased {
			inFlight[f]++
			if m.LeaseExpiresAt != s.expiry[id] {
				t.Fatalf("%v: expiry %d, model %d", id, m.LeaseExpiresAt, s.expiry[id])
			}
		}
	}
	for f, q := range map[fate]*Queue{inParent: s.parent, inDLQ: s.dlq} {
		st := q.Stats()
		if int(st.Depth+st.InFlight) != counts[f] || int(st.InFlight) != inFlight[f] {
			t.Fatalf("%s: depth %d in flight %d, model %d stored %d leased", q.name, st.Depth, st.InFlight, counts[f], inFlight[f])
		}
	}
	for name, c := range s.credit {
		got, unlimited, ok := s.parent.Credit(name)
		if !ok || unlimited != (c < 0) || !unlimited && int64(got) != c {
			t.Fatalf("credit of %s: %d %v %v, model %d", name, got, unlimited, ok, c)
		}
	}
}

// checkReplay replays the recorded commands on fresh queues and compares them with the live
// ones (property 5): equal stats, equal messages in equal enqueue order, and the same
// deliveries from then on.
func (s *sim) checkReplay(t *rapid.T) {
	for _, pair := range []struct {
		live *Queue
		cmds []Command
	}{{s.parent, s.parentCmds}, {s.dlq, s.dlqCmds}} {
		live := pair.live
		replay, err := NewQueue(live.name, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if live == s.dlq {
			replay.cfg = live.cfg // the DLQ was created with its own config, not by a command
		}
		for i, c := range pair.cmds {
			if err := replay.Apply(c); err != nil {
				t.Fatalf("%s: replaying command %d %#v: %v", live.name, i, c, err)
			}
		}
		live.Advance(s.now)
		replay.Advance(s.now)
		ls, rs := live.Stats(), replay.Stats()
		ls.ActiveConsumers, rs.ActiveConsumers = 0, 0
		if diff := cmp.Diff(ls, rs); diff != "" {
			t.Fatalf("%s: replayed stats differ (-live +replay):\n%s", live.name, diff)
		}
		lm, rm := slices.Collect(live.Messages()), slices.Collect(replay.Messages())
		if diff := cmp.Diff(lm, rm); diff != "" {
			t.Fatalf("%s: replayed messages differ (-live +replay):\n%s", live.name, diff)
		}
		for name := range live.subIdx {
			_ = live.Unsubscribe(name)
		}
		for _, q := range []*Queue{live, replay} {
			if err := q.Subscribe("final", 0); err != nil {
				t.Fatal(err)
			}
		}
		far := s.now + 1<<40
		if diff := cmp.Diff(live.Dispatch(far, math.MaxInt, nil), replay.Dispatch(far, math.MaxInt, nil)); diff != "" {
			t.Fatalf("%s: replayed queue delivers differently (-live +replay):\n%s", live.name, diff)
		}
	}
}

// Properties 2–5 over random sequences of every operation.
func TestPropertyRandomOperations(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newSim(t)
		actions := s.actions()
		for range 5 { // about 150 steps: enough for retries, dead letters and redrives
			t.Repeat(actions)
		}
		s.checkReplay(t)
	})
	c := simCoverage
	t.Logf("over all cases: %+v", c)
	if c.leased == 0 || c.failed == 0 || c.deadLettered == 0 || c.expired == 0 || c.redriven == 0 {
		t.Errorf("the random operations never reached some paths: %+v", c)
	}
}

// Property 1: with backlog in every key, over windows of whole DRR rounds (starting anywhere),
// each key's share of deliveries is within 1% of weight / sum of weights.
func TestPropertyWeightedShares(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		weights := []uint32{1, 2, 3, 4, 5}
		if rapid.Bool().Draw(t, "random") {
			weights = rapid.SliceOfN(rapid.Uint32Range(1, 10), 2, 6).Draw(t, "weights")
		}
		cfg := DefaultConfig()
		cfg.Quantum = rapid.Uint32Range(1, 3).Draw(t, "quantum")
		q, _ := NewQueue("q", cfg)
		var sum uint64
		for _, w := range weights {
			sum += uint64(w)
		}
		round := int(sum) * int(cfg.Quantum)
		const rounds = 150                                 // a window of R rounds is exact up to one turn per key: error ≤ 1/R
		skip := rapid.IntRange(0, 3*round).Draw(t, "skip") // the window starts anywhere
		total := skip + rounds*round
		var msgs []Message
		for i, w := range weights { // enough for a backlog in every key throughout
			need := total*int(w)/int(sum) + int(w*cfg.Quantum) + 1
			for n := range need {
				msgs = append(msgs, Message{ID: mid(uint64(i)<<32 | uint64(n)), FairnessKey: fmt.Sprint(i), Weight: w})
			}
		}
		if err := q.ApplyEnqueue(Enqueue{Msgs: msgs}); err != nil {
			t.Fatal(err)
		}
		_ = q.Subscribe("c", 0)
		var ls []Lease
		for len(ls) < total { // in uneven batches, acking as we go
			before := len(ls)
			ls = q.Dispatch(0, rapid.IntRange(1, 50).Draw(t, "batch"), ls)
			for _, l := range ls[before:] {
				_ = q.ApplyAck(Ack{ID: l.ID})
			}
		}
		counts := make([]int, len(weights))
		for _, l := range ls[skip:total] {
			counts[binaryID(l.ID)>>32]++
		}
		for i, w := range weights {
			want := float64(rounds*round) * float64(w) / float64(sum)
			if got := float64(counts[i]); got < want*0.99 || got > want*1.01 {
				t.Fatalf("key %d (weight %d of %d): %v deliveries, want %v ± 1%%", i, w, sum, got, want)
			}
		}
	})
}

func binaryID(id MsgID) uint64 {
	var n uint64
	for _, b := range id[:8] {
		n = n<<8 | uint64(b)
	}
	return n
}
