package fila

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// ConsumeOptions configures a subscription. Zero values mean the defaults.
type ConsumeOptions struct {
	// MaxUnacked is the credit window (default 256): the initial credit of the Consume. The SDK
	// grants one more credit each time a delivery is acked, nacked or its lease is lost, so at
	// most MaxUnacked deliveries are unsettled at once. A server without CREDIT_FLOW_CONTROL
	// ignores credit and pushes freely.
	MaxUnacked uint32
	// Throttles are declared with the subscription (throttling.md).
	Throttles []Throttle
	// DisableLeaseKeepAlive turns off the automatic ExtendLease heartbeats. By default every
	// unsettled delivery's lease is extended, by its original duration, at half its remaining
	// time, until it is acked or nacked, the server answers MessageNotFound, or MaxLeaseExtension
	// has passed.
	DisableLeaseKeepAlive bool
	// MaxLeaseExtension bounds keep-alive: a delivery's lease is extended for at most this long
	// after the delivery arrived (the last extension is shortened to end then), after which the
	// SDK stops extending it, the lease runs out on the server and the message is delivered
	// again, as a failed attempt; LeaseLost is closed once it has run out. It guards against a
	// handler that hangs holding a message forever. Default DefaultMaxLeaseExtension (one hour);
	// negative = no limit. Delivery.Extend is not bounded by it.
	MaxLeaseExtension time.Duration
	// MaxDeliveries, when positive, is the most deliveries the subscription asks for in total
	// (redeliveries included): the initial credit is at most MaxDeliveries, and finished
	// deliveries stop granting credit once that many have been allowed. A consumer that will
	// take exactly N messages sets it to N, so that the server never leases a message that
	// nobody will read (such a lease would expire and count as a failed attempt). It needs
	// CREDIT_FLOW_CONTROL; without it the server ignores credit.
	MaxDeliveries uint64
}

// DefaultMaxUnacked is the credit window when ConsumeOptions.MaxUnacked is 0.
const DefaultMaxUnacked = 256

// DefaultMaxLeaseExtension is ConsumeOptions.MaxLeaseExtension when it is 0: one hour, as the
// Google Cloud Pub/Sub clients' MaxExtension. A handler that needs longer sets more; SQS's own
// limit on a message's visibility is 12 hours.
const DefaultMaxLeaseExtension = time.Hour

// Consumer is one subscription. Next and C are safe for concurrent use; use one or the other.
//
// With reconnection (Options.MaxReconnects), a Consumer survives its connection: on the new
// connection it subscribes again with a fresh credit window (MaxUnacked), and Next goes on
// returning deliveries. Messages leased on the lost connection stay leased on the server until
// their lease ends, and are then redelivered (the attempt counts as failed): those whose Delivery
// frame was lost with the connection, and those whose lease ran out during the outage (or with
// keep-alive off). The deliveries the consumer still holds, buffered or returned by Next, keep
// their leases alive over the new connection and can be acked; an ack after the lease ended
// answers MessageNotFound. A Consumer whose resubscription the server refuses (QueueNotFound,
// NotLeader, ...) stops with that error.
type Consumer struct {
	c          *Client
	id         uint32 // the Consume's request ID on the current link, guarded by c.mu
	queue      string
	throttles  []fibp.ThrottleDeclaration
	maxUnacked uint32
	keepAlive  bool
	maxExtend  time.Duration // ConsumeOptions.MaxLeaseExtension with its default; negative = none
	flow       atomic.Bool   // CREDIT_FLOW_CONTROL is active: grant credit as deliveries finish
	gen        atomic.Uint32 // subscription generation: one more per (re)subscription
	owed       atomic.Uint32
	limit      uint64        // ConsumeOptions.MaxDeliveries; 0 = none
	allowed    atomic.Uint64 // credit granted so far, initial included (counted only with a limit)
	received   atomic.Uint64 // deliveries received, over every connection

	ctx    context.Context // ends when Close is called
	cancel context.CancelFunc
	notify chan struct{}
	chOnce sync.Once
	ch     chan *Delivery

	mu         sync.Mutex
	buf        []*Delivery
	head       int
	err        error // terminal error, returned once the buffer is drained
	closed     bool  // Close was called
	consumerID string
}

// Consume subscribes to queue. It returns once the server answered ConsumeOk; an Error frame
// (QueueNotFound, NotLeader with its leader_addr, InvalidThrottle, ThrottleConflict, ...) is
// returned as an *Error. While the client is reconnecting it waits for the connection within
// ctx (then fails with a *ReconnectError).
func (c *Client) Consume(ctx context.Context, queue string, opts ConsumeOptions) (*Consumer, error) {
	if opts.MaxUnacked == 0 {
		opts.MaxUnacked = DefaultMaxUnacked
	}
	if opts.MaxLeaseExtension == 0 {
		opts.MaxLeaseExtension = DefaultMaxLeaseExtension
	}
	credit := opts.MaxUnacked
	if opts.MaxDeliveries > 0 && opts.MaxDeliveries < uint64(credit) {
		credit = uint32(opts.MaxDeliveries)
	}
	req := &fibp.Consume{Queue: queue, Credit: credit}
	for i := range opts.Throttles {
		req.Throttles = append(req.Throttles, opts.Throttles[i].wire())
	}
	s := &Consumer{
		c:          c,
		queue:      queue,
		throttles:  req.Throttles,
		maxUnacked: opts.MaxUnacked,
		keepAlive:  !opts.DisableLeaseKeepAlive,
		maxExtend:  opts.MaxLeaseExtension,
		limit:      opts.MaxDeliveries,
		notify:     make(chan struct{}, 1),
	}
	s.allowed.Store(uint64(credit))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cl, err := c.start(ctx, req, fibp.OpConsumeOk, s)
	if err != nil {
		return nil, err
	}
	fr, err := c.await(ctx, cl)
	if err != nil {
		// Stopped first, s is not resubscribed by a reconnection any more. The server may have
		// subscribed meanwhile when we gave up waiting, or s was resubscribed on a new
		// connection: cancel it.
		s.stop(err, true)
		if l, id, ok := c.removeConsumer(s); ok && (ctx.Err() != nil || l != cl.l) {
			c.sendOn(l, id, &fibp.CancelConsume{})
		}
		return nil, err
	}
	s.setConsumerID(fr.(*fibp.ConsumeOk).ConsumerID)
	return s, nil
}

// removeConsumer forgets a subscription. It reports the link and request ID it was registered
// under, if it was registered on the live link; a subscription waiting for a link is dropped
// from the waiting list.
func (c *Client) removeConsumer(s *Consumer) (*link, uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.cur.Load(); l != nil && c.subs[s.id] == s {
		delete(c.subs, s.id)
		return l, s.id, true
	}
	for i, o := range c.orphans {
		if o == s {
			c.orphans = append(c.orphans[:i], c.orphans[i+1:]...)
			break
		}
	}
	return nil, 0, false
}

// rebind records the request ID and generation of a new (re)subscription. c.mu is held.
func (s *Consumer) rebind(id uint32, flow bool) {
	s.id = id
	s.gen.Add(1)
	s.flow.Store(flow)
	s.owed.Store(0)
}

// resumeCredit is the credit of a resubscription: a full window, within what MaxDeliveries
// still allows. ok is false when MaxDeliveries deliveries have been received.
func (s *Consumer) resumeCredit() (credit uint32, ok bool) {
	credit = s.maxUnacked
	if s.limit == 0 {
		return credit, true
	}
	got := s.received.Load()
	if got >= s.limit {
		return 0, false
	}
	credit = uint32(min(uint64(credit), s.limit-got))
	s.allowed.Store(got + uint64(credit))
	return credit, true
}

func (s *Consumer) setConsumerID(id string) {
	s.mu.Lock()
	s.consumerID = id
	s.mu.Unlock()
}

// deliver handles a Delivery frame on the reader goroutine of l.
func (c *Client) deliver(l *link, id uint32, body []byte) {
	c.mu.Lock()
	var s *Consumer
	if c.cur.Load() == l {
		s = c.subs[id]
	}
	c.mu.Unlock()
	if s == nil {
		return // a subscription we cancelled; its leases expire on the server
	}
	var f fibp.Delivery
	if err := f.Decode(body); err != nil {
		s.fail(invalidFrame("Delivery: %v", err))
		return
	}
	s.received.Add(uint64(len(f.Messages)))
	now := c.leases.clock.Now()
	ds := make([]*Delivery, len(f.Messages))
	for i := range f.Messages {
		ds[i] = newDelivery(c, s, &f.Messages[i])
		c.leases.track(ds[i], now)
	}
	s.push(ds)
}

// ConsumerID is the server's identifier of the subscription (from its latest ConsumeOk: a
// resubscription gets a new one).
func (s *Consumer) ConsumerID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consumerID
}

// Queue is the subscribed queue.
func (s *Consumer) Queue() string { return s.queue }

func (s *Consumer) push(ds []*Delivery) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		for _, d := range ds {
			s.c.leases.untrack(d)
		}
		return
	}
	s.buf = append(s.buf, ds...)
	s.mu.Unlock()
	s.signal()
}

func (s *Consumer) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// grant owes the server one more credit for a finished delivery of subscription generation
// gen, unless MaxDeliveries have been allowed already; the writer sends what is owed with its
// next write. Deliveries of an earlier generation (a lost connection) earn nothing: the
// resubscription opened a fresh window.
func (s *Consumer) grant(gen uint32) {
	if !s.flow.Load() || gen != s.gen.Load() {
		return
	}
	if s.limit > 0 && s.allowed.Add(1) > s.limit {
		return
	}
	s.owed.Add(1)
	if l := s.c.cur.Load(); l != nil {
		l.out.creditDirty.Store(true)
		l.out.signal()
	}
}

// Next returns the next delivery, waiting until one arrives, ctx ends, or the subscription
// stops. It is cancellation safe: a delivery is never lost to a cancelled Next.
func (s *Consumer) Next(ctx context.Context) (*Delivery, error) {
	for {
		s.mu.Lock()
		if s.head < len(s.buf) && !s.closed {
			d := s.buf[s.head]
			s.buf[s.head] = nil
			s.head++
			more := s.head < len(s.buf)
			if !more {
				s.buf, s.head = s.buf[:0], 0
			}
			s.mu.Unlock()
			if more {
				s.signal() // wake another waiting Next
			}
			return d, nil
		}
		if err := s.err; err != nil {
			s.mu.Unlock()
			s.signal()
			return nil, err
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// C returns a channel of deliveries fed by a goroutine calling Next; it is closed when the
// subscription stops (Err then tells why). A delivery taken by that goroutine when the consumer
// is closed is dropped, and its lease expires on the server.
func (s *Consumer) C() <-chan *Delivery {
	s.chOnce.Do(func() {
		s.ch = make(chan *Delivery)
		go func() {
			defer close(s.ch)
			for {
				d, err := s.Next(s.ctx)
				if err != nil {
					return
				}
				select {
				case s.ch <- d:
				case <-s.ctx.Done():
					return
				}
			}
		}()
	})
	return s.ch
}

// Err is why the subscription stopped (ErrConsumerClosed after Close), or nil while it runs.
func (s *Consumer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close sends CancelConsume and stops the subscription. Deliveries not yet returned by Next are
// dropped (their leases expire on the server); those already returned can still be acked.
func (s *Consumer) Close() error {
	if !s.stop(ErrConsumerClosed, true) {
		return nil
	}
	if l, id, ok := s.c.removeConsumer(s); ok {
		s.c.sendOn(l, id, &fibp.CancelConsume{})
	}
	return nil
}

// terminate stops the subscription because the client stopped; buffered deliveries are still
// returned by Next before err.
func (s *Consumer) terminate(err error) { s.stop(err, false) }

// fail stops the subscription after an error from the server and cancels it there.
func (s *Consumer) fail(err error) {
	s.stop(err, false)
	if l, id, ok := s.c.removeConsumer(s); ok {
		s.c.sendOn(l, id, &fibp.CancelConsume{})
	}
}

// stop records the terminal error once, optionally dropping the buffer. It reports whether this
// call was the one that closed the consumer by Close.
func (s *Consumer) stop(err error, drop bool) bool {
	s.mu.Lock()
	if drop && s.closed {
		s.mu.Unlock()
		return false
	}
	if s.err == nil {
		s.err = err
	}
	var dropped []*Delivery
	if drop {
		s.closed = true
		dropped = s.buf[s.head:]
		s.buf, s.head = nil, 0
	}
	s.mu.Unlock()
	for _, d := range dropped {
		s.c.leases.untrack(d)
	}
	if drop {
		s.cancel() // C's goroutine stops at once; otherwise it drains the buffer first
	}
	s.signal()
	return true
}
