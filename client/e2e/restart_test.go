package e2e

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

// TestRestart stops a private broker with SIGTERM and starts it again on the same data directory:
// queues, messages (ready, delayed and leased), config and DLQ contents survive, and a lease left
// unacked is redelivered once it expires.
func TestRestart(t *testing.T) {
	t.Parallel()
	s := privateServer(t)
	c := dial(t, s.addr)
	before := fillBeforeRestart(t, c)

	s.restart(t)

	// The old connection was told Disconnect.
	select {
	case <-c.Done():
		if err := c.Err(); !errors.Is(err, fila.ErrServerDisconnected) {
			t.Errorf("old client stopped with %v, want ErrServerDisconnected", err)
		}
	case <-time.After(waitFor):
		t.Fatal("the old client did not notice the shutdown")
	}

	c = dial(t, s.addr)
	checkRestored(t, c, before)
	checkRedelivered(t, c, before)
	checkDLQRestored(t, c, before)
	// New IDs still increase past the ones issued before the restart.
	id := enqueue(t, c, fila.Message{Queue: before.work, Payload: []byte("after")})[0]
	for _, old := range before.ids {
		if string(id[:]) <= string(old[:]) {
			t.Errorf("ID %v issued after the restart is not above %v", id, old)
		}
	}
}

// restartConfig is the runtime config TestRestart sets before the restart.
var restartConfig = map[string]string{"app.owner": "e2e", "scheduler.quantum": "2", "defaults.max_attempts": "7"}

// beforeRestart is what TestRestart did before the restart.
type beforeRestart struct {
	work, doomed  string
	ids           []fila.MessageID
	payloadOf     map[fila.MessageID]string
	acked, leased *fila.Delivery
	dead          []fila.MessageID // dead-lettered from doomed
}

// fillBeforeRestart creates the queues and config, enqueues to work (4 ready messages with
// headers and fairness keys, 1 delayed for an hour), acks one delivery and leaves one leased,
// and dead-letters two messages of doomed.
func fillBeforeRestart(t *testing.T, c *fila.Client) beforeRestart {
	ctx := testCtx(t)
	var b beforeRestart
	b.work = createQueue(t, c, fila.QueueConfig{Name: "work", VisibilityTimeout: 3 * time.Second, MaxAttempts: 5, Backoff: fibp.BackoffNone})
	b.doomed = createQueue(t, c, fila.QueueConfig{Name: "doomed", MaxAttempts: 1})
	for k, v := range restartConfig {
		if err := c.SetConfig(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []fila.Message
	for i := range 4 {
		msgs = append(msgs, fila.Message{Queue: b.work, Payload: fmt.Appendf(nil, "w-%d", i),
			Headers: map[string]string{"i": fmt.Sprint(i)}, FairnessKey: fmt.Sprint("k", i%2), Weight: uint32(1 + i%2)})
	}
	msgs = append(msgs, fila.Message{Queue: b.work, Payload: []byte("delayed"), Delay: time.Hour})
	b.ids = enqueue(t, c, msgs...)
	b.payloadOf = map[fila.MessageID]string{}
	for i, id := range b.ids {
		b.payloadOf[id] = string(msgs[i].Payload)
	}
	// One delivery acked, one left leased (no keep-alive).
	cons := consume(t, c, b.work, fila.ConsumeOptions{MaxUnacked: 2, DisableLeaseKeepAlive: true})
	b.acked, b.leased = next(t, cons), next(t, cons)
	cons.Close() // no more deliveries: the ack below must not earn a third
	ack(t, b.acked)
	b.dead = deadLetter(t, c, b.doomed, 2)
	if st := getStats(t, c, b.work); st.InFlight != 1 || st.Depth != 3 {
		t.Fatalf("work stats before the restart %+v, want 1 in flight and 3 waiting", st)
	}
	return b
}

// checkRestored checks the queues, config, stats and the restored lease after the restart.
func checkRestored(t *testing.T, c *fila.Client, b beforeRestart) {
	ctx := testCtx(t)
	l, err := c.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range l.Queues {
		names = append(names, q.Name)
	}
	slices.Sort(names)
	if want := []string{"doomed", "doomed.dlq", "work", "work.dlq"}; !slices.Equal(names, want) {
		t.Errorf("queues after the restart %v, want %v", names, want)
	}
	for k, v := range restartConfig {
		if got, err := c.GetConfig(ctx, k); err != nil || got != v {
			t.Errorf("after the restart GetConfig %s = %q, %v; want %q", k, got, err, v)
		}
	}
	st := getStats(t, c, b.work)
	if st.Depth+st.InFlight != 4 || st.Delayed != 1 || st.Quantum != 2 {
		t.Errorf("work stats after the restart %+v, want 4 messages (1 delayed), quantum 2", st)
	}
	// The lease was restored with the message (unless it has run out meanwhile).
	if time.Now().Before(b.leased.LeaseExpiresAt) && st.InFlight != 1 {
		t.Errorf("work stats after the restart %+v, want the unexpired lease in flight", st)
	}
	if st := getStats(t, c, b.doomed+".dlq"); st.Depth != 2 {
		t.Errorf("DLQ depth after the restart %d, want 2", st.Depth)
	}
	// The restored lease is known: it can be extended (here: shortened, to expire soon).
	if time.Now().Before(b.leased.LeaseExpiresAt) {
		res, err := c.ExtendLease(ctx, fila.ExtendLeaseItem{Queue: b.work, ID: b.leased.ID, By: 100 * time.Millisecond})
		if err != nil || res[0].Err != nil {
			t.Errorf("ExtendLease of the restored lease: %v %v", res, err)
		}
	}
}

// checkRedelivered checks that everything not acked comes back: the leased message (once its
// lease expired) with attempt 2.
func checkRedelivered(t *testing.T, c *fila.Client, b beforeRestart) {
	cons := consume(t, c, b.work, fila.ConsumeOptions{MaxUnacked: 10})
	got := map[fila.MessageID]*fila.Delivery{}
	for len(got) < 3 {
		d := next(t, cons)
		got[d.ID] = d
		ack(t, d)
	}
	if _, again := got[b.acked.ID]; again {
		t.Errorf("the acked message %v came back", b.acked.ID)
	}
	if d := got[b.leased.ID]; d == nil || d.AttemptCount != 2 {
		t.Errorf("the leased message after the restart: %+v, want it redelivered with attempt 2", d)
	}
	for id, d := range got {
		if b.payloadOf[id] != string(d.Payload) || d.Headers["i"] == "" || d.FairnessKey == "" {
			t.Errorf("after the restart %v has payload %q headers %v key %q, enqueued as %q", id, d.Payload, d.Headers, d.FairnessKey, b.payloadOf[id])
		}
		if id != b.leased.ID && d.AttemptCount != 1 {
			t.Errorf("%v attempt %d after the restart, want 1", id, d.AttemptCount)
		}
	}
	st := getStats(t, c, b.work)
	if st.Depth != 1 || st.Delayed != 1 || st.InFlight != 0 {
		t.Errorf("work stats after consuming %+v, want only the delayed message", st)
	}
}

// checkDLQRestored checks that the DLQ kept its messages intact, and that they can still be
// redriven.
func checkDLQRestored(t *testing.T, c *fila.Client, b beforeRestart) {
	ctx := testCtx(t)
	dlq := consume(t, c, b.doomed+".dlq", fila.ConsumeOptions{MaxUnacked: 2})
	var back []fila.NackItem
	for range 2 {
		d := next(t, dlq)
		if !slices.Contains(b.dead, d.ID) || d.Headers["i"] == "" {
			t.Errorf("DLQ delivery after the restart %+v, want one of %v with its headers", d, b.dead)
		}
		back = append(back, fila.NackItem{Queue: d.Queue, ID: d.ID, Error: "put back", RetryAfter: fila.Ptr(time.Duration(0))})
	}
	dlq.Close() // so that the nacked messages stay in the DLQ instead of coming straight back
	if errs, err := c.Nack(ctx, back...); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Nack in the DLQ: %v %v", errs, err)
	}
	waitStats(t, c, b.doomed+".dlq", "both messages back", func(s *fila.QueueStats) bool { return s.Depth == 2 && s.InFlight == 0 })
	if res, err := c.Redrive(ctx, b.doomed+".dlq", 0, 0); err != nil || res.Redriven != 2 {
		t.Errorf("Redrive after the restart = %+v, %v", res, err)
	}
}
