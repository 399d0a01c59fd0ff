package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// Load shapes shared by both brokers, so that each has the same number of messages in flight.
const (
	publishProducers   = 4    // connections publishing in the publish workloads
	batchSize          = 100  // messages per FIBP Enqueue frame
	batchWindow        = 4    // Enqueue frames in flight per producer; JetStream gets batchSize*batchWindow pending acks
	lifecycleProducers = 2    // connections publishing during the lifecycle workloads
	consumerCredit     = 1000 // deliveries in flight per consumer (FIBP credit, JetStream pull batch)
	latencyCredit      = 10   // credit of the latency consumer, topped up after each delivery
)

// filaLoad drives producers and consumers over pipelined FIBP connections built on the generated
// codec, so that the figures are the broker's and not an SDK's.
type filaLoad struct {
	addr, queue string
	payload     []byte
	limit       int64 // producers stop once this many messages were accepted (0 = never)

	enqueued, failed, acked atomic.Int64

	quit  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []*fibpconn.Conn
}

func newFilaLoad(addr, queue string, size int) *filaLoad {
	return &filaLoad{addr: addr, queue: queue, payload: make([]byte, size), quit: make(chan struct{})}
}

func (l *filaLoad) dial() (*fibpconn.Conn, error) {
	c, err := fibpconn.Dial(l.addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns = append(l.conns, c)
	l.mu.Unlock()
	return c, nil
}

// stop ends the producers and closes every connection.
func (l *filaLoad) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// produce starts n producers, each keeping batchWindow Enqueue frames of batchSize messages in
// flight. The frame is built once and re-sent: the connection encodes it before Go returns.
func (l *filaLoad) produce(n int) error {
	for range n {
		c, err := l.dial()
		if err != nil {
			return err
		}
		req := &fibp.Enqueue{Messages: make([]fibp.EnqueueMessage, batchSize)}
		for i := range req.Messages {
			req.Messages[i] = fibp.EnqueueMessage{Queue: l.queue, Payload: l.payload}
		}
		l.wg.Go(func() { l.produceLoop(c, req) })
	}
	return nil
}

func (l *filaLoad) produceLoop(c *fibpconn.Conn, req *fibp.Enqueue) {
	l.produceLoopWith(c, func() *fibp.Enqueue { return req })
}

// produceLoopWith is produceLoop sending the frame next returns each time (called on one goroutine).
func (l *filaLoad) produceLoopWith(c *fibpconn.Conn, next func() *fibp.Enqueue) {
	sem := make(chan struct{}, batchWindow)
	var lastFailed int64
	for {
		select {
		case <-l.quit:
			return
		case sem <- struct{}{}:
		}
		if l.limit > 0 && l.enqueued.Load() >= l.limit {
			return
		}
		if f := l.failed.Load(); f != lastFailed { // ChannelFull: back off a little
			lastFailed = f
			time.Sleep(5 * time.Millisecond)
		}
		c.Go(next(), func(f fibp.Frame, err error) {
			<-sem
			res, ok := f.(*fibp.EnqueueResult)
			if err != nil || !ok {
				l.failed.Add(batchSize)
				return
			}
			var good int64
			for _, r := range res.Results {
				if r.ErrorCode == fibp.CodeOk {
					good++
				}
			}
			l.enqueued.Add(good)
			l.failed.Add(int64(len(res.Results)) - good)
		})
	}
}

// consume subscribes n consumers with consumerCredit each. Every Delivery frame is acknowledged in
// one Ack frame and its credit granted back; acked counts the acknowledgements the server confirmed.
func (l *filaLoad) consume(n int) error {
	for range n {
		c, err := l.dial()
		if err != nil {
			return err
		}
		var sub uint32
		ready := make(chan struct{})
		ack := &fibp.Ack{}
		// The callback runs on the connection's reader goroutine, one Delivery at a time, so
		// reusing ack is safe: Go encodes it before returning.
		sub, err = c.Consume(l.queue, consumerCredit, func(d *fibp.Delivery) {
			<-ready
			ack.Items = ack.Items[:0]
			for _, m := range d.Messages {
				ack.Items = append(ack.Items, fibp.AckItem{Queue: m.Queue, MessageID: m.MessageID})
			}
			c.Go(ack, l.countAcks)
			c.Credit(sub, uint32(len(d.Messages)))
		})
		close(ready)
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *filaLoad) countAcks(f fibp.Frame, err error) {
	res, ok := f.(*fibp.AckResult)
	if err != nil || !ok {
		return
	}
	for _, r := range res.Results {
		if r.ErrorCode == fibp.CodeOk {
			l.acked.Add(1)
		}
	}
}

// createQueue creates a queue with the server's defaults; one that exists already will do.
func createQueue(addr, name string) error {
	c, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Call(&fibp.CreateQueue{Name: name})
	if err != nil {
		return err
	}
	if code := res.(*fibp.CreateQueueResult).ErrorCode; code != fibp.CodeOk && code != fibp.CodeQueueAlreadyExists {
		return fmt.Errorf("create queue %s: %v", name, code)
	}
	return nil
}

// filaPublish measures accepted messages per second from publishProducers batching producers.
func filaPublish(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		addr, err := e.queueAddr(ctx, p, "bench")
		if err != nil {
			return nil, err
		}
		l := newFilaLoad(addr, "bench", size)
		defer l.stop()
		if err := l.produce(publishProducers); err != nil {
			return nil, err
		}
		rate, err := e.measureRate(ctx, "fila publish", l.enqueued.Load)
		if err == nil && l.enqueued.Load() == 0 {
			err = fmt.Errorf("no message was accepted (%d failed)", l.failed.Load())
		}
		return []float64{rate}, err
	}
}

// filaLifecycle pre-fills a queue, then measures acknowledged messages per second while
// lifecycleProducers keep enqueueing and n consumers consume and ack.
func filaLifecycle(n int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		addr, err := e.queueAddr(ctx, p, "work")
		if err != nil {
			return nil, err
		}
		rate, err := e.filaLifecycleOn(ctx, addr, "work", n)
		return []float64{rate}, err
	}
}

// filaLifecycleOn pre-fills queue at addr (its leader), then measures acknowledged messages per
// second while lifecycleProducers keep enqueueing and n consumers consume and ack.
func (e *env) filaLifecycleOn(ctx context.Context, addr, queue string, n int) (float64, error) {
	fill := newFilaLoad(addr, queue, 1024)
	fill.limit = e.o.prefill
	err := fill.produce(lifecycleProducers)
	if err == nil {
		done := make(chan struct{})
		go func() { fill.wg.Wait(); close(done) }()
		err = e.waitFill(ctx, "fila prefill", fill.enqueued.Load, done)
	}
	fill.stop()
	if err != nil {
		return 0, err
	}
	l := newFilaLoad(addr, queue, 1024)
	defer l.stop()
	if err := l.consume(n); err != nil {
		return 0, err
	}
	if err := l.produce(lifecycleProducers); err != nil {
		return 0, err
	}
	return e.measureRate(ctx, fmt.Sprintf("fila lifecycle %dc on %s", n, queue), l.acked.Load)
}

// waitFill shows the progress of a pre-fill until done closes, then checks that count reached
// the -prefill size.
func (e *env) waitFill(ctx context.Context, label string, count func() int64, done <-chan struct{}) error {
	b := bar(e.o.prefill, label)
	defer b.Finish()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			if n := count(); n < e.o.prefill {
				return fmt.Errorf("pre-fill stopped at %d of %d messages", n, e.o.prefill)
			}
			return nil
		case <-tick.C:
			b.Set64(count())
		}
	}
}

// filaLatency enqueues one message at a time and times it from the Enqueue call to its delivery.
func filaLatency(ctx context.Context, e *env, p *peer) ([]float64, error) {
	l := newFilaLoad(p.addr, "latency", 1024)
	defer l.stop()
	arrived := make(chan time.Time, 1)
	prod, _, err := l.pair(func(cons *fibpconn.Conn, d *fibp.Delivery) {
		at := time.Now()
		cons.Go(&fibp.Ack{Items: []fibp.AckItem{{Queue: l.queue, MessageID: d.Messages[0].MessageID}}}, func(fibp.Frame, error) {})
		arrived <- at
	})
	if err != nil {
		return nil, err
	}
	req := &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: l.queue, Payload: l.payload}}}
	p50, p99, err := e.measureLatency(ctx, "fila latency", func() (time.Duration, error) {
		start := time.Now()
		res, err := prod.Call(req)
		if err != nil {
			return 0, err
		}
		if r := res.(*fibp.EnqueueResult); len(r.Results) != 1 || r.Results[0].ErrorCode != fibp.CodeOk {
			return 0, fmt.Errorf("enqueue answered %+v", r.Results)
		}
		select {
		case at := <-arrived:
			return at.Sub(start), nil
		case <-time.After(deliveryWait):
			return 0, errors.New("a message was not delivered within 10 s")
		}
	})
	return []float64{p50, p99}, err
}

// pair sets up the one-message-at-a-time workloads (latency, round trip): it creates the load's
// queue and dials a producer and a consumer connection; the consumer subscribes with
// latencyCredit, hands each Delivery to onDelivery and then tops its credit up by the messages
// the Delivery carried. The connections close with l.stop.
func (l *filaLoad) pair(onDelivery func(cons *fibpconn.Conn, d *fibp.Delivery)) (prod, cons *fibpconn.Conn, err error) {
	if err := createQueue(l.addr, l.queue); err != nil {
		return nil, nil, err
	}
	if prod, err = l.dial(); err != nil {
		return nil, nil, err
	}
	if cons, err = l.dial(); err != nil {
		return nil, nil, err
	}
	var sub uint32
	ready := make(chan struct{}) // sub is set
	sub, err = cons.Consume(l.queue, latencyCredit, func(d *fibp.Delivery) {
		<-ready
		onDelivery(cons, d)
		cons.Credit(sub, uint32(len(d.Messages)))
	})
	close(ready)
	if err != nil {
		return nil, nil, err
	}
	return prod, cons, nil
}
