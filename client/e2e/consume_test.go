package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// TestCreditBoundsUnacked: the server never has more than MaxUnacked deliveries of a
// subscription outstanding, and each ack's Credit lets exactly one more through.
func TestCreditBoundsUnacked(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	enqueue(t, c, payloads(q, "m", 10)...)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 3})

	// The server leases everything it may in one dispatch, so the first observation of at least 3
	// in flight shows whether it stopped at the credit.
	st := waitStats(t, c, q, "3 in flight", func(s *fila.QueueStats) bool { return s.InFlight >= 3 })
	if st.InFlight != 3 || st.Depth != 7 {
		t.Fatalf("with credit 3: %+v, want 3 in flight and 7 waiting", st)
	}
	// An enqueue makes the queue dispatch again; still no credit, so nothing more is leased.
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("extra")})
	if st := getStats(t, c, q); st.InFlight != 3 || st.Depth != 8 {
		t.Fatalf("after another enqueue at zero credit: %+v, want 3 in flight and 8 waiting", st)
	}

	// Each ack grants one credit: in flight returns to 3 while the backlog drains.
	acked := 0
	var outstanding []*fila.Delivery
	for acked < 11 {
		for len(outstanding) < 3 && acked+len(outstanding) < 11 {
			outstanding = append(outstanding, next(t, cons))
		}
		ack(t, outstanding[0])
		outstanding = outstanding[1:]
		acked++
		left := uint64(11 - acked)
		want := min(left, 3)
		st := waitStats(t, c, q, "the credit refilled", func(s *fila.QueueStats) bool { return s.InFlight+s.Depth == left && s.InFlight == want })
		if st.InFlight > 3 {
			t.Fatalf("%d in flight with MaxUnacked 3", st.InFlight)
		}
	}
}

func TestCancelConsume(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	a := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 5})
	b := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 5})
	if a.ConsumerID() == "" || a.ConsumerID() == b.ConsumerID() {
		t.Errorf("consumer IDs %q and %q", a.ConsumerID(), b.ConsumerID())
	}
	waitStats(t, c, q, "2 consumers", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 2 })
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("held")})
	waitStats(t, c, q, "1 in flight", func(s *fila.QueueStats) bool { return s.InFlight == 1 })

	a.Close()
	b.Close()
	waitStats(t, c, q, "no consumers after CancelConsume", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 0 })
	if _, err := a.Next(testCtx(t)); err != fila.ErrConsumerClosed {
		t.Errorf("Next after Close = %v, want ErrConsumerClosed", err)
	}
	// Cancelling does not release the lease early, and nothing new is delivered to the cancelled
	// subscriptions.
	enqueue(t, c, payloads(q, "after", 3)...)
	if st := getStats(t, c, q); st.InFlight != 1 || st.Depth != 3 {
		t.Errorf("after CancelConsume: %+v, want the lease kept (1 in flight) and 3 waiting", st)
	}
	// A new subscription gets the waiting messages.
	d := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 3})
	for range 3 {
		ack(t, next(t, d))
	}

	d.Close()

	// Losing the connection ends its subscriptions, but not its leases.
	c2 := dial(t, "")
	consume(t, c2, q, fila.ConsumeOptions{MaxUnacked: 1})
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("orphaned")})
	waitStats(t, c, q, "the second lease", func(s *fila.QueueStats) bool { return s.InFlight == 2 && s.ActiveConsumers == 1 })
	c2.Close()
	st := waitStats(t, c, q, "no consumers after the connection closed", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 0 })
	if st.InFlight != 2 || st.Depth != 0 {
		t.Errorf("after the connection closed: %+v, want both leases kept", st)
	}
}

func TestConsumeMissingQueue(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	_, err := c.Consume(testCtx(t), queueName(t), fila.ConsumeOptions{})
	wantCode(t, "Consume of a missing queue", err, fila.ErrQueueNotFound)
	// The connection is still usable.
	if _, err := c.Ping(testCtx(t)); err != nil {
		t.Errorf("Ping after a failed Consume: %v", err)
	}
}

func TestTwoConsumersShareAQueue(t *testing.T) {
	t.Parallel()
	c1, c2 := dial(t, ""), dial(t, "")
	q := createQueue(t, c1, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	a := consume(t, c1, q, fila.ConsumeOptions{MaxUnacked: 20})
	b := consume(t, c2, q, fila.ConsumeOptions{MaxUnacked: 20})
	waitStats(t, c1, q, "2 consumers", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 2 })
	ids := enqueue(t, c1, payloads(q, "shared", 20)...)
	waitStats(t, c1, q, "20 in flight", func(s *fila.QueueStats) bool { return s.InFlight == 20 })

	type got struct {
		name string
		d    *fila.Delivery
	}
	ch := make(chan got)
	ctx := testCtx(t)
	for name, cons := range map[string]*fila.Consumer{"a": a, "b": b} {
		go func() {
			for {
				d, err := cons.Next(ctx)
				if err != nil {
					return
				}
				select {
				case ch <- got{name, d}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	seen := map[fila.MessageID]string{}
	per := map[string]int{}
	for range 20 {
		var g got
		select {
		case g = <-ch:
		case <-time.After(waitFor):
			t.Fatalf("only %d of 20 messages arrived: %v", len(seen), per)
		}
		if other, dup := seen[g.d.ID]; dup {
			t.Errorf("%v delivered to both %s and %s", g.d.ID, other, g.name)
		}
		seen[g.d.ID] = g.name
		per[g.name]++
		ack(t, g.d)
	}
	if per["a"] == 0 || per["b"] == 0 {
		t.Errorf("20 messages split %v between two consumers with credit: deliveries must rotate", per)
	}
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			t.Errorf("message %v was not received by either consumer", id)
		}
	}
}

// A consumer whose queue is deleted is told so: Next ends with QueueNotFound instead of waiting
// for ever, and the client keeps working.
func TestConsumerOfADeletedQueueEnds(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 5})
	waitStats(t, c, q, "1 consumer", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.DeleteQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if d, err := cons.Next(ctx); !errors.Is(err, fila.ErrQueueNotFound) {
		t.Fatalf("Next on a deleted queue: %v, %v; want ErrQueueNotFound", d, err)
	}
	other := createQueue(t, c, fila.QueueConfig{})
	enqueue(t, c, fila.Message{Queue: other, Payload: []byte("after")})
	next(t, consume(t, c, other, fila.ConsumeOptions{MaxUnacked: 5}))
}
