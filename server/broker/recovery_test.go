package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/queuegroup"
)

// describe renders a group's replicated state: every message of both lanes in enqueue order with
// its state, and every key's scheduler state and ready order.
func describe(st *queuegroup.State) string {
	var b strings.Builder
	for l := queuegroup.LaneQueue; l <= queuegroup.LaneDeadLetter; l++ {
		q := st.Lane(l)
		fmt.Fprintf(&b, "lane %v %+v\n", l, q.Config())
		for m := range q.Messages() {
			fmt.Fprintf(&b, "  %v key=%s w=%d enq=%d nb=%d att=%d rd=%d err=%q %v lease=%d..%d %s\n", m.ID, m.FairnessKey, m.Weight,
				m.EnqueuedAt, m.NotBefore, m.Attempts, m.RedriveCount, m.LastError, m.State, m.LeasedAt, m.LeaseExpiresAt, m.Consumer)
		}
		for k := range q.SnapshotKeys() {
			fmt.Fprintf(&b, "  key %+v:", k)
			for id := range q.ReadyOrder(k.Name) {
				fmt.Fprintf(&b, " %v", id)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// groupState describes the state of queue name's group as its actor holds it, once nothing is in
// flight, with the delayed messages that are due promoted (as GetStats does: promotion is a
// function of the clock, not a command, so a replay makes it at the next timed command).
func groupState(t *rapid.T, s *script, name string) string {
	r := s.b.lookup(name)
	if r.a == nil {
		t.Fatalf("queue %s is gone", name)
	}
	var out string
	r.a.call(func(a *actor) {
		a.drain()
		now := a.now()
		a.st.Lane(queuegroup.LaneQueue).Advance(now)
		a.st.Lane(queuegroup.LaneDeadLetter).Advance(now)
		out = describe(a.st)
	})
	return out
}

// Real recovery, through the broker, on the in-memory store: random operations with power
// failures at random points between them. After each recovery every queue's state — every
// message with its attempts, retry time, lease and error, every key's deficit and ready order —
// equals the state before the crash, which is the state of the committed log: nothing answered
// is lost, nothing acked comes back, and no lease, attempt or retry is invented.
func TestRecoveryRebuildsTheCommittedState(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newScript(t)
		defer s.close()
		s.do("open")
		s.do("create q visibility=5000 attempts=3")
		delivered := func() []string {
			var out []string
			for _, line := range strings.Split(s.do("deliveries"), "\n") {
				if f := strings.Fields(line); len(f) > 1 {
					out = append(out, f[1])
				}
			}
			return out
		}
		var leased []string
		crashes := 0
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0, 1:
				s.do(fmt.Sprintf("enqueue q %s key=%s delay=%d", rapid.StringMatching(`[a-z]{1,3}`).Draw(rt, "payload"),
					rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "key"), rapid.SampledFrom([]int{0, 0, 100}).Draw(rt, "delay")))
			case 2:
				if len(s.sinks) == 0 {
					s.do(fmt.Sprintf("consume q c%d credit=%d", crashes, rapid.IntRange(1, 3).Draw(rt, "credit")))
				}
			case 3:
				if len(leased) > 0 {
					s.do("ack q " + rapid.SampledFrom(leased).Draw(rt, "ack"))
				}
			case 4:
				if len(leased) > 0 {
					s.do("nack q " + rapid.SampledFrom(leased).Draw(rt, "nack"))
				}
			case 5:
				s.do(fmt.Sprintf("advance %dms", rapid.SampledFrom([]int{50, 1000, 6000}).Draw(rt, "advance")))
			case 6:
				before := groupState(rt, s, "q")
				s.do("crash")
				s.do("open")
				crashes++
				if after := groupState(rt, s, "q"); after != before {
					rt.Fatalf("recovered state differs\nbefore:\n%s\nafter:\n%s", before, after)
				}
				leased = nil
				continue
			}
			time.Sleep(time.Millisecond)
			leased = append(leased, delivered()...)
		}
	})
}
