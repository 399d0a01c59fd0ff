package fila

import (
	"context"
	"sync"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// ProducerOptions configures a Producer. Zero values mean the defaults.
type ProducerOptions struct {
	// MaxBatch is the most messages in one Enqueue frame (default 256).
	MaxBatch int
	// MaxBatchBytes is the encoded size at which a batch is sent without waiting (default 1 MiB).
	// A single larger message travels alone, split into continuation frames when needed.
	MaxBatchBytes int
	// Linger is how long the first message of a batch waits for company (default 1ms; negative =
	// no wait: each message is its own batch).
	Linger time.Duration
	// MaxInFlight is the most Enqueue frames awaiting their result at once (default 8). Beyond
	// it, sealed batches queue, and once that queue is full SendAsync blocks.
	MaxInFlight int
}

func (o ProducerOptions) withDefaults() ProducerOptions {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 1 << 20
	}
	if o.Linger == 0 {
		o.Linger = time.Millisecond
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 8
	}
	return o
}

// Producer batches messages from any number of goroutines into Enqueue frames: a batch is sent
// when it reaches MaxBatch messages or MaxBatchBytes, or Linger after its first message. Each
// message gets its own result. Batches are sent in the order they were sealed.
//
// With reconnection (Options.MaxReconnects), a batch whose connection dropped before its answer
// came is sent again on the next connection, until it is answered or the client stops (Close, or
// reconnection gave up); batches sealed while disconnected wait for the connection. Retried
// batches may reach the server out of seal order. A resent frame may duplicate messages the
// server had already stored when the connection dropped: give each message an IdempotencyKey to
// make the retry safe — within the queue's dedup window the server answers the repeat Ok,
// Duplicate, with the original's ID, and stores nothing.
type Producer struct {
	c    *Client
	opts ProducerOptions

	mu     sync.Mutex
	cur    *prodBatch
	closed bool

	omu         sync.Mutex
	outstanding map[*prodBatch]struct{}

	queue          chan *prodBatch
	slots          chan struct{}
	dispatcherDone chan struct{}
	hints          func([]fibp.RouteHint) // a ClusterProducer's: the route hints of each result
}

type prodBatch struct {
	req   fibp.Enqueue
	pend  []*Pending
	bytes int
	timer *time.Timer
	done  chan struct{}
}

// Pending is the eventual result of one SendAsync.
type Pending struct {
	c    *Client
	done chan struct{}
	res  EnqueueResult
	then func(EnqueueResult) // when set, takes the result in place of resolving (a ClusterProducer's)
}

func (p *Pending) resolve(r EnqueueResult) {
	if p.then != nil {
		p.then(r)
		return
	}
	p.res = r
	close(p.done)
}

// Done is closed when the result is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait returns the message's ID, or its error (per-message or whole-frame), or ctx's error if
// ctx ends first (the message may still be enqueued); when ctx ends while the client is
// reconnecting, that error is a *ReconnectError (errors.Is ErrDisconnected and ctx's error).
func (p *Pending) Wait(ctx context.Context) (MessageID, error) {
	select {
	case <-p.done:
		return p.res.ID, p.res.Err
	case <-ctx.Done():
		if p.c == nil { // a ClusterProducer's, for a node it could not reach
			return MessageID{}, ctx.Err()
		}
		return MessageID{}, p.c.waitErr(ctx.Err())
	}
}

// Result returns the full result; call it only after Done is closed.
func (p *Pending) Result() EnqueueResult { return p.res }

// NewProducer returns a batching producer on this connection. Close it when done: it owns a
// dispatcher goroutine.
func (c *Client) NewProducer(opts ProducerOptions) *Producer {
	o := opts.withDefaults()
	p := &Producer{
		c:              c,
		opts:           o,
		outstanding:    map[*prodBatch]struct{}{},
		queue:          make(chan *prodBatch, 2*o.MaxInFlight),
		slots:          make(chan struct{}, o.MaxInFlight),
		dispatcherDone: make(chan struct{}),
	}
	go p.dispatch()
	return p
}

// Send enqueues m as part of a batch and waits for its result.
func (p *Producer) Send(ctx context.Context, m Message) (MessageID, error) {
	m.Headers = inject(p.c.opts.Propagator, ctx, m.Headers)
	return p.SendAsync(m).Wait(ctx)
}

// SendAsync adds m to the current batch and returns at once (unless too many batches are
// already queued). m.Payload must not change until the Pending is done.
func (p *Producer) SendAsync(m Message) *Pending {
	pd := &Pending{c: p.c, done: make(chan struct{})}
	p.send(m, pd)
	return pd
}

// send adds m to the current batch; pd gets its result.
func (p *Producer) send(m Message, pd *Pending) {
	if err := m.check(); err != nil {
		pd.resolve(EnqueueResult{Err: err})
		return
	}
	em := m.wire()
	if err := checkMessage(&em); err != nil {
		pd.resolve(EnqueueResult{Err: err})
		return
	}
	size := em.Size()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		pd.resolve(EnqueueResult{Err: ErrProducerClosed})
		return
	}
	if b := p.cur; b != nil && b.bytes+size > p.opts.MaxBatchBytes {
		p.sealLocked()
	}
	if p.cur == nil {
		p.cur = p.newBatchLocked()
	}
	b := p.cur
	b.req.Messages = append(b.req.Messages, em)
	b.pend = append(b.pend, pd)
	b.bytes += size
	if len(b.pend) >= p.opts.MaxBatch || b.bytes >= p.opts.MaxBatchBytes || p.opts.Linger < 0 {
		p.sealLocked()
	}
}

func (p *Producer) newBatchLocked() *prodBatch {
	b := &prodBatch{done: make(chan struct{})}
	p.omu.Lock()
	p.outstanding[b] = struct{}{}
	p.omu.Unlock()
	if p.opts.Linger > 0 {
		b.timer = time.AfterFunc(p.opts.Linger, func() {
			p.mu.Lock()
			if p.cur == b {
				p.sealLocked()
			}
			p.mu.Unlock()
		})
	}
	return b
}

// sealLocked hands the current batch to the dispatcher. It blocks while the queue is full.
func (p *Producer) sealLocked() {
	b := p.cur
	p.cur = nil
	if b.timer != nil {
		b.timer.Stop()
	}
	p.queue <- b
}

// dispatch starts the batches in order, at most MaxInFlight awaiting their result.
func (p *Producer) dispatch() {
	defer close(p.dispatcherDone)
	for b := range p.queue {
		select {
		case p.slots <- struct{}{}:
		case <-p.c.done:
			p.finish(b, nil, p.c.closedErr())
			continue
		}
		cl, err := p.c.start(p.c.life, &b.req, fibp.OpEnqueueResult, nil)
		if err != nil {
			<-p.slots
			p.finish(b, nil, err)
			continue
		}
		go func() {
			res, err := p.c.enqueueFrame(context.Background(), &b.req, cl, true)
			<-p.slots
			p.finish(b, res, err)
		}()
	}
}

func (p *Producer) finish(b *prodBatch, res *fibp.EnqueueResult, err error) {
	if err != nil {
		for _, pd := range b.pend {
			pd.resolve(EnqueueResult{Err: err})
		}
	} else {
		if p.hints != nil {
			p.hints(res.RouteHints) // before the results: their callbacks read the routes
		}
		for i, r := range enqueueResults(&b.req, res) {
			b.pend[i].resolve(r)
		}
	}
	p.omu.Lock()
	delete(p.outstanding, b)
	p.omu.Unlock()
	close(b.done)
}

// Flush sends the current batch now and waits until every batch sent so far has its result.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.cur != nil && !p.closed {
		p.sealLocked()
	}
	p.mu.Unlock()
	p.omu.Lock()
	waiting := make([]*prodBatch, 0, len(p.outstanding))
	for b := range p.outstanding {
		waiting = append(waiting, b)
	}
	p.omu.Unlock()
	for _, b := range waiting {
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close sends what is batched, waits for every result, and stops the producer. Later sends
// fail with ErrProducerClosed. It does not close the Client. While the client is reconnecting it
// waits for the connection (closing the Client ends that wait: the results fail).
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	if p.cur != nil {
		p.sealLocked()
	}
	p.closed = true
	close(p.queue)
	p.mu.Unlock()
	<-p.dispatcherDone
	return p.Flush(context.Background())
}
