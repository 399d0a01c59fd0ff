package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

// deadLetter enqueues n messages to q (max_attempts 1) and nacks each once, so that they land in
// q.dlq; it returns their IDs in enqueue order.
func deadLetter(t *testing.T, c *fila.Client, q string, n int) []fila.MessageID {
	t.Helper()
	msgs := payloads(q, "dead", n)
	for i := range msgs {
		msgs[i].Headers = map[string]string{"i": fmt.Sprint(i)}
	}
	ids := enqueue(t, c, msgs...)
	cons, err := c.Consume(testCtx(t), q, fila.ConsumeOptions{MaxUnacked: uint32(n)})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	items := make([]fila.NackItem, n)
	for i := range n {
		d := next(t, cons)
		items[i] = fila.NackItem{Queue: q, ID: d.ID, Error: "fatal"}
	}
	errs, err := c.Nack(testCtx(t), items...)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("nack %d: %v", i, e)
		}
	}
	waitStats(t, c, q+".dlq", fmt.Sprintf("depth %d", n), func(s *fila.QueueStats) bool { return s.Depth == uint64(n) })
	// Close only sends CancelConsume: until the server has ended the subscription it leases
	// what reaches the queue, a redrive's messages too, and they stay in flight until their
	// visibility timeout. The callers count the queue's depth, so wait for the end here.
	cons.Close()
	waitStats(t, c, q, "no consumer", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 0 })
	return ids
}

func TestRedrive(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fastQueue(30*time.Second, 1))
	dlq := q + ".dlq"
	ids := deadLetter(t, c, q, 3)

	_, err := c.Redrive(ctx, q, 0, fibp.ReclassifyAll)
	wantCode(t, "Redrive of a queue that is not a DLQ", err, fila.ErrNotADLQ)
	_, err = c.Redrive(ctx, queueName(t)+".dlq", 0, fibp.ReclassifyAll)
	wantCode(t, "Redrive of a missing queue", err, fila.ErrQueueNotFound)

	_, err = c.Redrive(ctx, dlq, 0, 3)
	wantCode(t, "Redrive with reclassify 3", err, fila.ErrInvalidConfigValue)

	// count limits the move, oldest first.
	res, err := c.Redrive(ctx, dlq, 2, fibp.ReclassifyAll)
	if err != nil {
		t.Fatal(err)
	}
	if *res != (fila.RedriveResult{Redriven: 2}) {
		t.Errorf("Redrive count 2 = %+v", res)
	}
	waitStats(t, c, q, "depth 2", func(s *fila.QueueStats) bool { return s.Depth == 2 })
	if st := getStats(t, c, dlq); st.Depth != 1 {
		t.Errorf("DLQ depth %d after redriving 2 of 3", st.Depth)
	}
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 3})
	got := map[fila.MessageID]*fila.Delivery{}
	for range 2 {
		d := next(t, cons)
		got[d.ID] = d
	}
	for i, id := range ids[:2] {
		d := got[id]
		if d == nil {
			t.Fatalf("redriven messages %v lack the oldest-but-%d %v", got, i, id)
		}
		if d.AttemptCount != 1 || d.RedriveCount != 1 || string(d.Payload) != fmt.Sprint("dead-", i) || d.Headers["i"] != fmt.Sprint(i) {
			t.Errorf("redriven delivery %+v, want attempt 1, redrive 1, its payload and headers", d)
		}
	}

	// Failing again sends it back (max_attempts 1 counts from the redrive); a second redrive of
	// everything counts up.
	for _, d := range got {
		if d.ID == ids[0] {
			if err := d.Nack(ctx, "still broken", nil); err != nil {
				t.Fatal(err)
			}
		} else {
			ack(t, d)
		}
	}
	waitStats(t, c, dlq, "depth 2", func(s *fila.QueueStats) bool { return s.Depth == 2 })
	res, err = c.Redrive(ctx, dlq, 0, fibp.ReclassifyNone)
	if err != nil || res.Redriven != 2 {
		t.Fatalf("Redrive all = %+v, %v; want 2 redriven", res, err)
	}
	redrives := map[fila.MessageID]uint32{}
	for range 2 {
		d := next(t, cons)
		redrives[d.ID] = d.RedriveCount
		if d.AttemptCount != 1 {
			t.Errorf("%v attempt %d after redrive, want 1", d.ID, d.AttemptCount)
		}
		ack(t, d)
	}
	if redrives[ids[0]] != 2 || redrives[ids[2]] != 1 {
		t.Errorf("redrive counts %v, want %v: 2 and %v: 1", redrives, ids[0], ids[2])
	}
	if st := getStats(t, c, dlq); st.Depth != 0 {
		t.Errorf("DLQ depth %d after redriving all", st.Depth)
	}
	// An empty DLQ redrives nothing.
	if res, err := c.Redrive(ctx, dlq, 0, fibp.ReclassifyAll); err != nil || res.Redriven != 0 {
		t.Errorf("Redrive of an empty DLQ = %+v, %v", res, err)
	}
}
