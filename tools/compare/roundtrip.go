package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// The durable round trip at light load: one 1 KB message at a time, timed from the moment its
// Enqueue (a JetStream publish) is sent until the answer to its Ack is received, the consumer
// acking as soon as the Delivery arrives. The next message is sent once the previous one's
// enqueue and ack were both answered, so the broker only ever has one message to commit: the
// figure is the commit path's fixed cost (two durable appends with fsync on), not its sharing.

// deliveryWait bounds how long a round trip waits for each of its steps.
const deliveryWait = 10 * time.Second

// filaRoundTrip measures Fila's round trip: Enqueue → Delivery → Ack → AckResult, with the
// producer and the consumer on connections of their own.
func filaRoundTrip(ctx context.Context, e *env, p *peer) ([]float64, error) {
	addr, err := e.queueAddr(ctx, p, "roundtrip")
	if err != nil {
		return nil, err
	}
	l := newFilaLoad(addr, "roundtrip", 1024)
	defer l.stop()
	delivered := make(chan [16]byte, latencyCredit)
	prod, cons, err := l.pair(func(_ *fibpconn.Conn, d *fibp.Delivery) {
		for _, m := range d.Messages {
			delivered <- m.MessageID
		}
	})
	if err != nil {
		return nil, err
	}
	req := &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: l.queue, Payload: l.payload}}}
	enqueued := make(chan error, 1)
	onEnqueued := func(f fibp.Frame, err error) {
		if err == nil {
			if r, ok := f.(*fibp.EnqueueResult); !ok || len(r.Results) != 1 || r.Results[0].ErrorCode != fibp.CodeOk {
				err = fmt.Errorf("enqueue answered %+v", f)
			}
		}
		enqueued <- err
	}
	ack := &fibp.Ack{Items: []fibp.AckItem{{Queue: l.queue}}}
	p50, p99, err := e.measureLatency(ctx, "fila round trip", func() (time.Duration, error) {
		start := time.Now()
		prod.Go(req, onEnqueued)
		var id [16]byte
		select {
		case id = <-delivered:
		case <-time.After(deliveryWait):
			return 0, errors.New("a message was not delivered within 10 s")
		}
		ack.Items[0].MessageID = id
		res, err := cons.Call(ack)
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if r, ok := res.(*fibp.AckResult); !ok || len(r.Results) != 1 || r.Results[0].ErrorCode != fibp.CodeOk {
			return 0, fmt.Errorf("ack answered %+v", res)
		}
		select {
		case err = <-enqueued:
		case <-time.After(deliveryWait):
			err = errors.New("an enqueue was not answered within 10 s")
		}
		return took, err
	})
	return []float64{p50, p99}, err
}

// jsRoundTrip measures JetStream's round trip on a work-queue stream: an async publish, its
// delivery to a pull consumer with explicit acks, and an ack that waits for the server's
// confirmation (DoubleAck); the PubAck is awaited before the next message, as Fila's
// EnqueueResult is.
func jsRoundTrip(ctx context.Context, e *env, p *peer) ([]float64, error) {
	l := newJSLoad(e, p, "roundtrip", 1024)
	defer l.stop()
	delivered := make(chan jetstream.Msg, latencyCredit)
	pjs, err := l.pair(ctx, "ROUNDTRIP", func(m jetstream.Msg) { delivered <- m })
	if err != nil {
		return nil, err
	}
	p50, p99, err := e.measureLatency(ctx, "nats round trip", func() (time.Duration, error) {
		start := time.Now()
		pub, err := pjs.PublishAsync("roundtrip", l.payload)
		if err != nil {
			return 0, err
		}
		var m jetstream.Msg
		select {
		case m = <-delivered:
		case <-time.After(deliveryWait):
			return 0, errors.New("a message was not delivered within 10 s")
		}
		actx, cancel := context.WithTimeout(ctx, deliveryWait)
		err = m.DoubleAck(actx)
		cancel()
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		select {
		case <-pub.Ok():
		case err = <-pub.Err():
		case <-time.After(deliveryWait):
			err = errors.New("a publish was not acknowledged within 10 s")
		}
		return took, err
	})
	return []float64{p50, p99}, err
}
