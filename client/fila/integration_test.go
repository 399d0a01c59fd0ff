package fila

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// These tests run against a live broker only when FILA_TEST_ADDR names one, e.g.
//
//	fila-server -data-dir /tmp/d -listen 127.0.0.1:15555 &
//	FILA_TEST_ADDR=127.0.0.1:15555 go test -run Live ./fila/
func liveClient(t *testing.T) (*Client, string) {
	addr := os.Getenv("FILA_TEST_ADDR")
	if addr == "" {
		t.Skip("FILA_TEST_ADDR not set")
	}
	c, err := Dial(context.Background(), addr, &Options{APIKey: os.Getenv("FILA_TEST_API_KEY")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	queue := fmt.Sprintf("sdk-test-%d", time.Now().UnixNano())
	return c, queue
}

func TestLiveProduceConsumeAck(t *testing.T) {
	c, queue := liveClient(t)
	ctx := testCtx(t)
	if _, err := c.CreateQueue(ctx, QueueConfig{Name: queue}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteQueue(context.Background(), queue)
	prod := c.NewProducer(ProducerOptions{})
	const n = 500
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := prod.Send(ctx, Message{Queue: queue, Payload: []byte(fmt.Sprint(i)), FairnessKey: fmt.Sprint(i % 5)}); err != nil {
				t.Errorf("Send: %v", err)
			}
		})
	}
	wg.Wait()
	prod.Close()
	cons, err := c.Consume(ctx, queue, ConsumeOptions{MaxUnacked: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[MessageID]bool{}
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

func TestLiveKeepAliveAndNack(t *testing.T) {
	c, queue := liveClient(t)
	ctx := testCtx(t)
	if _, err := c.CreateQueue(ctx, QueueConfig{Name: queue, VisibilityTimeout: 400 * time.Millisecond,
		Backoff: fibp.BackoffNone}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteQueue(context.Background(), queue)
	if _, err := c.Enqueue(ctx, Message{Queue: queue, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	cons, err := c.Consume(ctx, queue, ConsumeOptions{MaxUnacked: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	d, err := cons.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // several lease lengths: only keep-alive holds it
	if err := d.Nack(ctx, "try again", nil); err != nil {
		t.Fatalf("Nack after keep-alive: %v", err)
	}
	d2, err := cons.Next(ctx)
	if err != nil || d2.ID != d.ID || d2.AttemptCount != 2 {
		t.Fatalf("redelivery = %+v, %v", d2, err)
	}
	if err := d2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d2.Ack(ctx); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("second ack = %v, want MessageNotFound", err)
	}
}

func TestLiveErrors(t *testing.T) {
	c, queue := liveClient(t)
	ctx := testCtx(t)
	if _, err := c.GetStats(ctx, queue); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("GetStats of a missing queue = %v", err)
	}
	if _, err := c.Consume(ctx, queue, ConsumeOptions{}); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("Consume of a missing queue = %v", err)
	}
	res, err := c.Enqueue(ctx, Message{Queue: queue})
	if err != nil || !errors.Is(res[0].Err, ErrQueueNotFound) {
		t.Errorf("Enqueue to a missing queue = %+v, %v", res, err)
	}
	if _, err := c.CreateQueue(ctx, QueueConfig{Name: queue + ".dlq"}); !errors.Is(err, ErrReservedQueueName) {
		t.Errorf("CreateQueue of a .dlq name = %v", err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}
