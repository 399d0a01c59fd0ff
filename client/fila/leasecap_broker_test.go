package fila_test

import (
	"context"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Against a real broker: once keep-alive has kept a lease for MaxLeaseExtension it stops, the
// lease runs out on the broker, LeaseLost is closed, and the message is delivered again as a
// second attempt, while the first delivery was never settled. The lease is a second long: the
// second attempt's keep-alive must reach the broker within it while make test's race step loads
// the machine (at 200 ms its Ack was once refused MessageNotFound there).
func TestMaxLeaseExtensionLetsTheLeaseRunOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	c, err := fila.Dial(ctx, brokerAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const queue = "lease-cap"
	createQueue(ctx, c, fila.QueueConfig{Name: queue, VisibilityTimeout: time.Second})
	if _, err := c.NewProducer(fila.ProducerOptions{}).Send(ctx, fila.Message{Queue: queue, Payload: []byte("slow")}); err != nil {
		t.Fatal(err)
	}
	cons, err := c.Consume(ctx, queue, fila.ConsumeOptions{MaxLeaseExtension: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	first, err := cons.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.LeaseLost():
	case <-ctx.Done():
		t.Fatal("the lease was kept past MaxLeaseExtension")
	}
	again, err := cons.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.AttemptCount != 2 {
		t.Fatalf("next delivery %v attempt %d, want %v again as attempt 2", again.ID, again.AttemptCount, first.ID)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
