package fila_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Each Example talks to the broker at brokerAddr (the SDK's tests start one there) on a queue
// of its own, which it creates and deletes.

// createQueue creates q unless it exists; examples end by deleting it.
func createQueue(ctx context.Context, c *fila.Client, q fila.QueueConfig) {
	if _, err := c.CreateQueue(ctx, q); err != nil && !errors.Is(err, fila.ErrQueueAlreadyExists) {
		log.Fatal(err)
	}
}

// Producing: a Producer batches the messages of many goroutines into few frames. Send waits for
// the broker's answer; SendAsync returns at once and its Pending is waited on later.
func ExampleProducer() {
	ctx := context.Background()
	c, err := fila.Dial(ctx, brokerAddr, &fila.Options{
		DialRetry:     true, // wait for a broker that is still starting (within ctx)
		MaxReconnects: -1,   // and ride out its restarts
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	createQueue(ctx, c, fila.QueueConfig{Name: "orders", MaxAttempts: 5, Backoff: fila.BackoffExponential})
	defer c.DeleteQueue(ctx, "orders")

	p := c.NewProducer(fila.ProducerOptions{})
	defer p.Close()
	if _, err := p.Send(ctx, fila.Message{Queue: "orders", Payload: []byte("order 1"), FairnessKey: "tenant-a"}); err != nil {
		log.Fatal(err)
	}
	var pending []*fila.Pending
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		pending = append(pending, p.SendAsync(fila.Message{
			Queue:          "orders",
			Payload:        []byte("order of " + tenant),
			FairnessKey:    tenant, // deliveries are shared fairly between tenants
			Headers:        map[string]string{"source": "web"},
			IdempotencyKey: "order-of-" + tenant, // a retried send is stored once
		}))
	}
	for _, pd := range pending {
		if _, err := pd.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	stats, err := c.GetStats(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("messages waiting:", stats.Depth, "fairness keys:", stats.ActiveFairnessKeys)
	// Output: messages waiting: 3 fairness keys: 2
}

// Consuming with a handler: Consume runs the handler on up to 4 deliveries at once; returning
// nil acks a message, returning an error nacks it (the queue's retry policy decides what
// follows). Leases are kept alive while a handler runs, for at most MaxLeaseExtension.
func ExampleConsumer_Consume() {
	ctx := context.Background()
	c, err := fila.Dial(ctx, brokerAddr, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	createQueue(ctx, c, fila.QueueConfig{Name: "emails"})
	defer c.DeleteQueue(ctx, "emails")
	for _, to := range []string{"ana", "bo", "cy"} {
		if _, err := c.Enqueue(ctx, fila.Message{Queue: "emails", Payload: []byte(to)}); err != nil {
			log.Fatal(err)
		}
	}

	cons, err := c.Consume(ctx, "emails", fila.ConsumeOptions{MaxUnacked: 16, MaxLeaseExtension: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close()
	run, stop := context.WithCancel(ctx)
	var handled atomic.Int32
	err = cons.Consume(run, func(ctx context.Context, d *fila.Delivery) error {
		fmt.Printf("sending to %s (attempt %d)\n", d.Payload, d.AttemptCount)
		if handled.Add(1) == 3 {
			stop() // this example stops after three; a service runs until shut down
		}
		return nil // ack
	}, 4)
	fmt.Println("stopped:", err)
	// Unordered output:
	// sending to ana (attempt 1)
	// sending to bo (attempt 1)
	// sending to cy (attempt 1)
	// stopped: context canceled
}

// Acking in batches: Client.Ack settles many messages in one frame and reports each one's
// outcome. (Delivery.Ack called from many goroutines is coalesced into shared frames too.)
func ExampleClient_Ack() {
	ctx := context.Background()
	c, err := fila.Dial(ctx, brokerAddr, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	createQueue(ctx, c, fila.QueueConfig{Name: "events"})
	defer c.DeleteQueue(ctx, "events")
	batch := []fila.Message{{Queue: "events", Payload: []byte("a")}, {Queue: "events", Payload: []byte("b")},
		{Queue: "events", Payload: []byte("c")}}
	if _, err := c.Enqueue(ctx, batch...); err != nil {
		log.Fatal(err)
	}

	cons, err := c.Consume(ctx, "events", fila.ConsumeOptions{MaxUnacked: 64})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close()
	var items []fila.AckItem
	for range batch {
		d, err := cons.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		items = append(items, fila.AckItem{Queue: d.Queue, ID: d.ID})
	}
	errs, err := c.Ack(ctx, items...)
	if err != nil {
		log.Fatal(err) // the whole frame failed
	}
	for i, err := range errs { // one per item, in order
		if err != nil {
			fmt.Printf("%v: %v\n", items[i].ID, err) // ErrMessageNotFound: its lease had ended
		}
	}
	fmt.Println("acked in one frame:", len(items))
	// Acking again: that message is gone, and only its item says so.
	errs, _ = c.Ack(ctx, items[0])
	fmt.Println("again:", errors.Is(errs[0], fila.ErrMessageNotFound))
	// Output:
	// acked in one frame: 3
	// again: true
}

// DLQ redrive: a message that failed its last attempt moves to the queue's dead-letter queue
// (<name>.dlq); once the cause is fixed, Redrive moves it back to be delivered again.
func ExampleClient_Redrive() {
	ctx := context.Background()
	c, err := fila.Dial(ctx, brokerAddr, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	createQueue(ctx, c, fila.QueueConfig{Name: "payments", MaxAttempts: 1})
	defer c.DeleteQueue(ctx, "payments")
	if _, err := c.Enqueue(ctx, fila.Message{Queue: "payments", Payload: []byte("refund 42")}); err != nil {
		log.Fatal(err)
	}
	cons, err := c.Consume(ctx, "payments", fila.ConsumeOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close()
	d, err := cons.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Nack(ctx, "card processor unavailable", nil); err != nil { // the only attempt failed
		log.Fatal(err)
	}
	dlq, err := c.GetStats(ctx, "payments.dlq")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dead-lettered:", dlq.Depth)

	res, err := c.Redrive(ctx, "payments.dlq", 0, fila.ReclassifyNone) // 0 = every message
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("redriven:", res.Redriven)
	d, err = cons.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: attempt %d, redriven %d time(s)\n", d.Payload, d.AttemptCount, d.RedriveCount)
	if err := d.Ack(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// dead-lettered: 1
	// redriven: 1
	// refund 42: attempt 1, redriven 1 time(s)
}
