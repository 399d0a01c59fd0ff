package e2e

// These were the opt-in Live tests of client/fila (gated on FILA_TEST_ADDR); they now always run
// here, against the broker TestMain starts (or FILA_TEST_ADDR).

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

func TestSDKProduceConsumeAck(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	queue := createQueue(t, c, fila.QueueConfig{})
	prod := c.NewProducer(fila.ProducerOptions{})
	const n = 500
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := prod.Send(ctx, fila.Message{Queue: queue, Payload: []byte(fmt.Sprint(i)), FairnessKey: fmt.Sprint(i % 5)}); err != nil {
				t.Errorf("Send: %v", err)
			}
		})
	}
	wg.Wait()
	prod.Close()
	cons := consume(t, c, queue, fila.ConsumeOptions{MaxUnacked: 16})
	seen := map[fila.MessageID]bool{}
	for len(seen) < n {
		d, err := cons.Next(ctx)
		if err != nil {
			t.Fatalf("after %d deliveries: %v", len(seen), err)
		}
		seen[d.ID] = true
		wg.Go(func() {
			if err := d.Ack(ctx); err != nil {
				t.Errorf("Ack: %v", err)
			}
		})
	}
	wg.Wait()
	st, err := c.GetStats(ctx, queue)
	if err != nil || st.Depth != 0 || st.InFlight != 0 {
		t.Errorf("stats after acking everything = %+v, %v", st, err)
	}
}

func TestSDKKeepAliveAndNack(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	queue := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: time.Second, Backoff: fibp.BackoffNone})
	if _, err := c.Enqueue(ctx, fila.Message{Queue: queue, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	cons := consume(t, c, queue, fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, cons)
	time.Sleep(3 * time.Second) // several lease lengths: only keep-alive holds it
	if err := d.Nack(ctx, "try again", nil); err != nil {
		t.Fatalf("Nack after keep-alive: %v", err)
	}
	d2 := next(t, cons)
	if d2.ID != d.ID || d2.AttemptCount != 2 {
		t.Fatalf("redelivery = %+v", d2)
	}
	if err := d2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d2.Ack(ctx); !errors.Is(err, fila.ErrMessageNotFound) {
		t.Errorf("second ack = %v, want MessageNotFound", err)
	}
}

func TestSDKErrors(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	queue := queueName(t)
	if _, err := c.GetStats(ctx, queue); !errors.Is(err, fila.ErrQueueNotFound) {
		t.Errorf("GetStats of a missing queue = %v", err)
	}
	if _, err := c.Consume(ctx, queue, fila.ConsumeOptions{}); !errors.Is(err, fila.ErrQueueNotFound) {
		t.Errorf("Consume of a missing queue = %v", err)
	}
	res, err := c.Enqueue(ctx, fila.Message{Queue: queue})
	if err != nil || !errors.Is(res[0].Err, fila.ErrQueueNotFound) {
		t.Errorf("Enqueue to a missing queue = %+v, %v", res, err)
	}
	if _, err := c.CreateQueue(ctx, fila.QueueConfig{Name: queue + ".dlq"}); !errors.Is(err, fila.ErrReservedQueueName) {
		t.Errorf("CreateQueue of a .dlq name = %v", err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	// A failed request carries the broker's message and the code's name.
	_, err = c.Consume(ctx, queue, fila.ConsumeOptions{})
	var fe *fila.Error
	if !errors.As(err, &fe) || fe.Message == "" || err.Error() != "fila: "+fe.Message+" (QueueNotFound)" {
		t.Errorf("Consume error = %#v", err)
	}
}
