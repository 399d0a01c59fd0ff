package engine

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder applies commands to a live queue and remembers them for replay.
type recorder struct {
	t    *testing.T
	q    *Queue
	cmds []Command
}

func (r *recorder) apply(c Command) {
	r.t.Helper()
	must(r.t, r.q.Apply(c))
	r.cmds = append(r.cmds, c)
}

func (r *recorder) dispatch(now int64, max int) []Lease {
	ls := r.q.Dispatch(now, max, nil)
	for _, l := range ls {
		r.cmds = append(r.cmds, l)
	}
	return ls
}

// checkReplay replays r's commands on a fresh queue and compares state and future deliveries.
func (r *recorder) checkReplay(now int64) {
	t := r.t
	t.Helper()
	replay := newTestQueue(t, DefaultConfig())
	for i, c := range r.cmds {
		if err := replay.Apply(c); err != nil {
			t.Fatalf("replaying command %d %#v: %v", i, c, err)
		}
	}
	r.q.Advance(now)
	replay.Advance(now)
	ls, rs := r.q.Stats(), replay.Stats()
	ls.ActiveConsumers, rs.ActiveConsumers = 0, 0
	if diff := cmp.Diff(ls, rs); diff != "" {
		t.Fatalf("replayed stats differ (-live +replay):\n%s", diff)
	}
	if diff := cmp.Diff(slices.Collect(r.q.Messages()), slices.Collect(replay.Messages())); diff != "" {
		t.Fatalf("replayed messages differ (-live +replay):\n%s", diff)
	}
	for name := range r.q.subIdx {
		must(t, r.q.Unsubscribe(name))
	}
	must(t, r.q.Subscribe("final", 0))
	must(t, replay.Subscribe("final", 0))
	if diff := cmp.Diff(r.q.Dispatch(now, math.MaxInt, nil), replay.Dispatch(now, math.MaxInt, nil)); diff != "" {
		t.Fatalf("replayed queue delivers differently (-live +replay):\n%s", diff)
	}
}

// A live promotion (Advance or a Dispatch that leases nothing) is not a command; the timed
// commands that follow must imply it, or a replay would order messages differently.
func TestReplayAfterLivePromotion(t *testing.T) {
	t.Run("fail", func(t *testing.T) {
		r := &recorder{t: t, q: newTestQueue(t, DefaultConfig())}
		must(t, r.q.Subscribe("c", 0))
		r.apply(Enqueue{At: 0, Msgs: []Message{msg(1, "k", 1), {ID: mid(2), FairnessKey: "k", NotBefore: 50}}})
		r.dispatch(0, 1)                                                // leases 1
		r.q.Advance(100)                                                // promotes 2: not a command
		r.apply(Fail{ID: mid(1), At: 100, NotBefore: 100, Attempts: 1}) // 1 is retried behind 2
		r.checkReplay(100)
	})
	t.Run("remove", func(t *testing.T) {
		r := &recorder{t: t, q: newTestQueue(t, DefaultConfig())}
		must(t, r.q.Subscribe("c", 0))
		r.apply(Enqueue{At: 0, Msgs: []Message{
			msg(1, "k", 3), msg(2, "k", 3), msg(3, "j", 1), {ID: mid(4), FairnessKey: "k", Weight: 3, NotBefore: 50},
		}})
		r.dispatch(0, 1)                     // k's turn: deficit 3, one spent
		r.dispatch(100, 0)                   // promotes 4 into k
		r.apply(Remove{ID: mid(2), At: 100}) // k keeps 4, its turn and its deficit
		r.checkReplay(100)
	})
	t.Run("enqueue", func(t *testing.T) {
		r := &recorder{t: t, q: newTestQueue(t, DefaultConfig())}
		r.apply(Enqueue{At: 0, Msgs: []Message{{ID: mid(1), FairnessKey: "a", NotBefore: 50}}})
		r.q.Advance(60)
		r.apply(Enqueue{At: 60, Msgs: []Message{msg(2, "b", 1)}}) // b joins the round after a
		r.checkReplay(60)
	})
}
