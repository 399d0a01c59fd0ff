package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// twin is a naive reference of the scheduler, written straight from concepts.md with slices
// and scans: the fast Queue must make exactly the same deliveries (the project style: fast code checked
// against a naive twin).
type twin struct {
	quantum uint64
	keys    map[string]*twinKey
	round   []string // keys with ready messages; round[0] has the turn
	subs    []string // subscriptions with credit; subs[0] receives next
	credit  map[string]int64
}

type twinKey struct {
	weight  uint64
	deficit uint64
	fifo    []MsgID
}

func (w *twin) ready(key string, id MsgID) {
	k := w.keys[key]
	k.fifo = append(k.fifo, id)
	if len(k.fifo) == 1 {
		w.round = append(w.round, key)
	}
}

func (w *twin) enqueue(key string, weight uint32, id MsgID) {
	if w.keys[key] == nil {
		w.keys[key] = &twinKey{}
	}
	w.keys[key].weight = uint64(max(weight, 1))
	w.ready(key, id)
}

func (w *twin) deliver() (MsgID, string, bool) {
	if len(w.round) == 0 || len(w.subs) == 0 {
		return MsgID{}, "", false
	}
	name := w.round[0]
	k := w.keys[name]
	if k.deficit == 0 {
		k.deficit = k.weight * w.quantum
	}
	id := k.fifo[0]
	k.fifo = k.fifo[1:]
	k.deficit--
	switch {
	case len(k.fifo) == 0:
		w.round, k.deficit = w.round[1:], 0
	case k.deficit == 0:
		w.round = append(w.round[1:], name)
	}
	sub := w.subs[0]
	w.subs = w.subs[1:]
	if c := w.credit[sub]; c != 1 {
		w.subs = append(w.subs, sub)
	}
	if w.credit[sub] > 0 {
		w.credit[sub]--
	}
	return id, sub, true
}

// twinSim drives a Queue and its twin with the same operations.
type twinSim struct {
	q      *Queue
	w      *twin
	keyOf  map[MsgID]string
	leased []MsgID
	next   uint64
}

func (s *twinSim) enqueue(t *rapid.T) {
	var c Enqueue
	for range rapid.IntRange(1, 5).Draw(t, "n") {
		s.next++
		m := Message{ID: mid(s.next), FairnessKey: rapid.SampledFrom([]string{"a", "b", "c", "d", "e"}).Draw(t, "key"),
			Weight: rapid.Uint32Range(0, 4).Draw(t, "weight")}
		c.Msgs = append(c.Msgs, m)
		s.w.enqueue(m.FairnessKey, m.Weight, m.ID)
		s.keyOf[m.ID] = m.FairnessKey
	}
	must(t, s.q.ApplyEnqueue(c))
}

func (s *twinSim) subscribe(t *rapid.T) {
	name := fmt.Sprint(rapid.IntRange(0, 4).Draw(t, "sub"))
	if _, ok := s.w.credit[name]; ok {
		t.Skip("subscribed")
	}
	credit := rapid.Uint32Range(0, 4).Draw(t, "credit")
	must(t, s.q.Subscribe(name, credit))
	s.w.credit[name] = int64(credit)
	if credit == 0 {
		s.w.credit[name] = -1
	}
	s.w.subs = append(s.w.subs, name)
}

func (s *twinSim) addCredit(t *rapid.T) {
	name := fmt.Sprint(rapid.IntRange(0, 4).Draw(t, "sub"))
	c, ok := s.w.credit[name]
	if !ok {
		t.Skip("not subscribed")
	}
	n := rapid.Uint32Range(0, 3).Draw(t, "n")
	must(t, s.q.AddCredit(name, n))
	if c >= 0 && n > 0 {
		if c == 0 {
			s.w.subs = append(s.w.subs, name)
		}
		s.w.credit[name] = min(c+int64(n), math.MaxUint32)
	}
}

func (s *twinSim) unsubscribe(t *rapid.T) {
	name := fmt.Sprint(rapid.IntRange(0, 4).Draw(t, "sub"))
	if _, ok := s.w.credit[name]; !ok {
		t.Skip("not subscribed")
	}
	must(t, s.q.Unsubscribe(name))
	delete(s.w.credit, name)
	if i := slices.Index(s.w.subs, name); i >= 0 {
		s.w.subs = slices.Delete(s.w.subs, i, i+1)
	}
}

func (s *twinSim) dispatch(t *rapid.T) {
	max := rapid.IntRange(0, 8).Draw(t, "max")
	got := s.q.Dispatch(0, max, nil)
	for i, l := range got {
		id, sub, ok := s.w.deliver()
		if !ok || l.ID != id || l.Consumer != sub {
			t.Fatalf("delivery %d: %v to %s; twin %v to %s (%v)", i, l.ID, l.Consumer, id, sub, ok)
		}
		s.leased = append(s.leased, l.ID)
	}
	if len(got) < max && len(s.w.round) > 0 && len(s.w.subs) > 0 {
		t.Fatalf("Dispatch stopped after %d while the twin can deliver", len(got))
	}
}

// ackOrRetry acks a leased message or fails it for an immediate retry (back of its key's FIFO).
func (s *twinSim) ackOrRetry(t *rapid.T) {
	if len(s.leased) == 0 {
		t.Skip("none leased")
	}
	i := rapid.IntRange(0, len(s.leased)-1).Draw(t, "i")
	id := s.leased[i]
	s.leased = slices.Delete(s.leased, i, i+1)
	if rapid.Bool().Draw(t, "ack") {
		must(t, s.q.ApplyAck(Ack{ID: id}))
		return
	}
	m, _ := s.q.Get(id)
	_, err := s.q.ApplyFail(Fail{ID: id, Error: "retry", Attempts: m.Attempts})
	must(t, err)
	s.w.ready(s.keyOf[id], id)
}

// restore replaces the queue with one restored from its snapshot, subscribed in the twin's
// rotation order with the same credit; subscriptions without credit are dropped (Subscribe
// cannot make one: 0 means unlimited). The twin must not notice.
func (s *twinSim) restore(t *rapid.T) {
	q := restore(t, s.q)
	for _, name := range s.w.subs {
		must(t, q.Subscribe(name, uint32(max(s.w.credit[name], 0))))
	}
	for name, c := range s.w.credit {
		if c == 0 {
			delete(s.w.credit, name)
		}
	}
	s.q = q
}

func TestDispatchMatchesNaiveTwin(t *testing.T) { checkTwin(t, nil) }

// checkTwin compares the engine with the twin over random actions, with extra actions drawn
// beside them.
func checkTwin(t *testing.T, extra map[string]func(*rapid.T)) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.Quantum = rapid.Uint32Range(1, 3).Draw(t, "quantum")
		s := &twinSim{
			q:     newTestQueue(t, cfg),
			w:     &twin{quantum: uint64(cfg.Quantum), keys: map[string]*twinKey{}, credit: map[string]int64{}},
			keyOf: map[MsgID]string{},
		}
		actions := map[string]func(*rapid.T){
			"enqueue": s.enqueue, "subscribe": s.subscribe, "addCredit": s.addCredit,
			"unsubscribe": s.unsubscribe, "dispatch": s.dispatch, "ackOrRetry": s.ackOrRetry, "restore": s.restore,
			"": func(t *rapid.T) {
				if err := checkInvariants(s.q); err != nil {
					t.Fatal(err)
				}
			},
		}
		maps.Copy(actions, extra)
		for range 5 {
			t.Repeat(actions)
		}
	})
}
