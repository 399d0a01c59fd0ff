package fila

import (
	"context"
	"sync"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// AckItem names one message to acknowledge.
type AckItem struct {
	Queue string
	ID    MessageID
}

// NackItem names one failed message. RetryAfter, when non-nil, sets the retry delay.
type NackItem struct {
	Queue      string
	ID         MessageID
	Error      string
	RetryAfter *time.Duration
}

// ExtendLeaseItem asks for a message's lease to end By from now.
type ExtendLeaseItem struct {
	Queue string
	ID    MessageID
	By    time.Duration
}

// ExtendLeaseResult is the outcome of one ExtendLeaseItem.
type ExtendLeaseResult struct {
	ExpiresAt time.Time // the new expiry (server clock); zero on error
	Err       error     // ErrMessageNotFound: the lease had ended; stop working on the message
}

func messageSubject(id MessageID) string { return "message " + id.String() }

// Ack acknowledges items in one Ack frame. The slice holds one error per item, in order (nil
// for success); the error is set when the whole request failed.
func (c *Client) Ack(ctx context.Context, items ...AckItem) ([]error, error) {
	req := &fibp.Ack{Items: make([]fibp.AckItem, len(items))}
	for i, it := range items {
		req.Items[i] = fibp.AckItem{Queue: it.Queue, MessageID: it.ID}
	}
	fr, err := c.settle(ctx, req, fibp.OpAckResult, func(i int) MessageID { return items[i].ID })
	if err != nil {
		return nil, err
	}
	return itemErrors(ackCodes(fr), len(items), func(i int) MessageID { return items[i].ID }), nil
}

// Nack reports failed attempts in one Nack frame; results as for Ack.
func (c *Client) Nack(ctx context.Context, items ...NackItem) ([]error, error) {
	req := &fibp.Nack{Items: make([]fibp.NackItem, len(items))}
	for i, it := range items {
		req.Items[i] = fibp.NackItem{Queue: it.Queue, MessageID: it.ID, Error: it.Error}
		if it.RetryAfter != nil {
			req.Items[i].RetryAfterMs = wire.Some(durationMs(*it.RetryAfter))
		}
	}
	fr, err := c.settle(ctx, req, fibp.OpNackResult, func(i int) MessageID { return items[i].ID })
	if err != nil {
		return nil, err
	}
	return itemErrors(nackCodes(fr), len(items), func(i int) MessageID { return items[i].ID }), nil
}

// settle sends an Ack or Nack, finishing the deliveries it settles as soon as the frame is
// queued: their credit then follows the frame on the wire.
func (c *Client) settle(ctx context.Context, req fibp.Frame, want fibp.Opcode, id func(int) MessageID) (fibp.Frame, error) {
	cl, err := c.start(ctx, req, want, nil)
	if err != nil {
		return nil, err
	}
	for i := range itemCount(req) {
		c.leases.finishID(id(i), false)
	}
	return c.await(ctx, cl)
}

func itemCount(req fibp.Frame) int {
	switch r := req.(type) {
	case *fibp.Ack:
		return len(r.Items)
	case *fibp.Nack:
		return len(r.Items)
	}
	return 0
}

// ExtendLease extends leases in one ExtendLease frame, each By from now. Tracked deliveries
// follow the answers: keep-alive continues from a new expiry, and MessageNotFound ends it.
func (c *Client) ExtendLease(ctx context.Context, items ...ExtendLeaseItem) ([]ExtendLeaseResult, error) {
	req := &fibp.ExtendLease{Items: make([]fibp.ExtendLeaseItem, len(items))}
	for i, it := range items {
		req.Items[i] = fibp.ExtendLeaseItem{Queue: it.Queue, MessageID: it.ID, ExtendByMs: durationMs(it.By)}
	}
	sentAt := c.leases.clock.Now()
	res, err := roundTrip[fibp.ExtendLeaseResult](ctx, c, req)
	if err != nil {
		return nil, err
	}
	out := make([]ExtendLeaseResult, len(items))
	for i, it := range items {
		if i >= len(res.Results) {
			out[i].Err = invalidFrame("ExtendLeaseResult has %d results for %d items", len(res.Results), len(items))
			continue
		}
		r := res.Results[i]
		out[i] = ExtendLeaseResult{ExpiresAt: msTime(r.LeaseExpiresAt)}
		if r.ErrorCode != fibp.CodeOk { // the subject is formatted for failures only: this is a hot path
			out[i].Err = resultError(r.ErrorCode, messageSubject(it.ID))
		}
		c.leases.extended(it.ID, r.ErrorCode, sentAt, it.By)
	}
	return out, nil
}

func ackCodes(fr fibp.Frame) []fibp.ErrorCode {
	r := fr.(*fibp.AckResult).Results
	codes := make([]fibp.ErrorCode, len(r))
	for i := range r {
		codes[i] = r[i].ErrorCode
	}
	return codes
}

func nackCodes(fr fibp.Frame) []fibp.ErrorCode {
	r := fr.(*fibp.NackResult).Results
	codes := make([]fibp.ErrorCode, len(r))
	for i := range r {
		codes[i] = r[i].ErrorCode
	}
	return codes
}

// itemErrors turns per-item codes into errors; a result missing for an item is InvalidFrame.
func itemErrors(codes []fibp.ErrorCode, n int, id func(int) MessageID) []error {
	errs := make([]error, n)
	for i := range errs {
		if i >= len(codes) {
			errs[i] = invalidFrame("result has %d items for %d requested", len(codes), n)
			continue
		}
		if codes[i] != fibp.CodeOk { // the subject is formatted for failures only: this is a hot path
			errs[i] = resultError(codes[i], messageSubject(id(i)))
		}
	}
	return errs
}

// coalescer gathers the acks (or nacks) of single deliveries from many goroutines into few
// frames: whatever is queued when a frame can go travels in it, with up to maxSettleInFlight
// frames awaiting their results at once. There is no artificial delay.
type coalescer[I any] struct {
	c     *Client
	build func([]I) fibp.Frame
	want  fibp.Opcode
	codes func(fibp.Frame) []fibp.ErrorCode
	wake  chan struct{}
	slots chan struct{}

	mu      sync.Mutex
	queue   []queued[I]
	running bool
	stopped bool
}

type queued[I any] struct {
	item I
	d    *Delivery
	done chan error
}

const (
	maxSettleInFlight = 4
	maxSettleBatch    = 4096
)

func newAckCoalescer(c *Client) *coalescer[fibp.AckItem] {
	return newCoalescer(c, fibp.OpAckResult, ackCodes, func(items []fibp.AckItem) fibp.Frame {
		return &fibp.Ack{Items: items}
	})
}

func newNackCoalescer(c *Client) *coalescer[fibp.NackItem] {
	return newCoalescer(c, fibp.OpNackResult, nackCodes, func(items []fibp.NackItem) fibp.Frame {
		return &fibp.Nack{Items: items}
	})
}

func newCoalescer[I any](c *Client, want fibp.Opcode, codes func(fibp.Frame) []fibp.ErrorCode, build func([]I) fibp.Frame) *coalescer[I] {
	return &coalescer[I]{
		c: c, build: build, want: want, codes: codes,
		wake:  make(chan struct{}, 1),
		slots: make(chan struct{}, maxSettleInFlight),
	}
}

// submit queues one item and waits for its result. While the client is reconnecting the item
// waits for the next connection; a submit whose ctx ends first returns a *ReconnectError (the
// item may still be sent once connected).
func (q *coalescer[I]) submit(ctx context.Context, item I, d *Delivery) error {
	w := queued[I]{item: item, d: d, done: make(chan error, 1)}
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return q.c.closedErr()
	}
	q.queue = append(q.queue, w)
	if !q.running {
		q.running = true
		go q.loop()
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return q.c.waitErr(ctx.Err())
	}
}

func (q *coalescer[I]) loop() {
	for {
		select {
		case <-q.wake:
		case <-q.c.done:
			q.stop()
			return
		}
		for {
			select {
			case q.slots <- struct{}{}:
			case <-q.c.done:
				q.stop()
				return
			}
			batch := q.take()
			if len(batch) == 0 {
				<-q.slots
				break
			}
			q.flush(batch)
		}
	}
}

func (q *coalescer[I]) take() []queued[I] {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.queue), maxSettleBatch)
	batch := q.queue[:n:n]
	q.queue = q.queue[n:]
	if len(q.queue) == 0 {
		q.queue = nil
	}
	return batch
}

// stop fails everything queued once the client has stopped, and refuses later submissions.
func (q *coalescer[I]) stop() {
	q.mu.Lock()
	q.stopped = true
	rest := q.queue
	q.queue = nil
	q.mu.Unlock()
	err := q.c.closedErr()
	for _, w := range rest {
		w.done <- err
	}
}

// flush sends batch as one frame (holding a slot) and resolves its items when the answer comes.
func (q *coalescer[I]) flush(batch []queued[I]) {
	items := make([]I, len(batch))
	for i, w := range batch {
		items[i] = w.item
	}
	cl, err := q.c.start(q.c.life, q.build(items), q.want, nil)
	if err != nil {
		<-q.slots
		for _, w := range batch {
			w.done <- err
		}
		return
	}
	for _, w := range batch {
		q.c.leases.finish(w.d, false)
	}
	go func() {
		fr, err := q.c.await(context.Background(), cl)
		<-q.slots
		if err != nil {
			for _, w := range batch {
				w.done <- err
			}
			return
		}
		errs := itemErrors(q.codes(fr), len(batch), func(i int) MessageID { return batch[i].d.ID })
		for i, w := range batch {
			w.done <- errs[i]
		}
	}()
}
