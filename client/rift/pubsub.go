package rift

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/client/internal/backoff"
	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
)

// Message is a live message or a reply. The client owns Payload.
type Message struct {
	Subject string
	Reply   string
	Payload []byte
}

func message(body []byte) (Message, error) {
	var r wire.Reader
	return decodeMessage(&r, body)
}

// decodeMessage decodes a MESSAGE body with r, which remembers the last few strings it decoded:
// a subscription reusing one reader does not allocate the same subject again and again.
func decodeMessage(r *wire.Reader, body []byte) (Message, error) {
	var m riftproto.Message
	r.Reset(body)
	m.DecodeFrom(r)
	r.ExpectEnd()
	if err := r.Err(); err != nil {
		return Message{}, &riftproto.FrameError{Opcode: riftproto.OpMessage, Err: err}
	}
	return Message{Subject: m.Subject, Reply: m.Reply, Payload: append([]byte(nil), m.Payload...)}, nil
}

// Subscription receives the messages of one SUBSCRIBE stream. Recv reads them from the stream
// itself: no goroutine and no queue stand between QUIC and the application, whose pace QUIC flow
// control passes on to the server (which ends a subscriber that falls too far behind as a slow
// consumer).
//
// With reconnection (WithMaxReconnects) a subscription outlives its connection: it subscribes
// again on the next connection by itself, and Recv waits meanwhile (returning a
// *ReconnectError when its context ends during the outage). Delivery is at most once: messages
// published while the subscription had no connection are not delivered to it.
type Subscription struct {
	c       *Client
	pattern string
	queue   string
	s       *call          // the current stream; nil while waiting for a new one (guarded by turn; mu for writes)
	next    chan subResult // (capacity 1) a resubscription's stream, or why it failed
	done    chan struct{}  // closed by Close
	mu      sync.Mutex     // guards s's replacement against Close, and next's contents
	turn    chan struct{}  // (capacity 1) held by the Recv that reads the stream
	r       wire.Reader    // decodes MESSAGE frames, remembering recent subjects
	err     error          // why deliveries ended; guarded by turn
	closed  atomic.Bool
	once    sync.Once
	conn    *quic.Conn // the connection of the latest stream (guarded by mu)

	dmu sync.Mutex // orders the read-deadline changes of Recv and of its context's AfterFunc
	gen uint64     // counts Recv calls that bound a context; guarded by dmu
}

// Subscribe subscribes to pattern ("*" matches one token, a final ">" the rest), in queue group
// queue ("" for none). It returns once the server has registered the subscription.
func (c *Client) Subscribe(ctx context.Context, pattern, queue string) (*Subscription, error) {
	req := &riftproto.Subscribe{Pattern: pattern, Queue: queue}
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("rift: subscribe: %w", err)
	}
	ctx, cancel := c.opContext(ctx, 0)
	defer cancel()
	s, err := c.openLongStream(ctx, subBufSize)
	if err != nil {
		return nil, err
	}
	if err := subscribeOn(ctx, s, req); err != nil {
		return nil, err
	}
	sub := &Subscription{c: c, pattern: pattern, queue: queue, s: s, conn: s.conn, next: make(chan subResult, 1),
		done: make(chan struct{}), turn: make(chan struct{}, 1)}
	if c.reconnecting() {
		c.mu.Lock()
		c.subs[sub] = struct{}{}
		c.mu.Unlock()
		if dead(s.conn) { // lost before registering: the reconnection may have missed it
			c.lost(s.conn)
			c.mu.Lock()
			conn := c.cur
			c.mu.Unlock()
			if conn != nil {
				go sub.resubscribe(conn)
			}
		}
	}
	return sub, nil
}

// subscribeOn sends SUBSCRIBE on s and waits for its OK; on failure it releases s.
func subscribeOn(ctx context.Context, s *call, req *riftproto.Subscribe) error {
	if err := s.write(riftproto.AppendFrame(nil, req)); err != nil {
		s.release()
		return s.ctxErr(ctx, err)
	}
	if _, err := s.expectOk(); err != nil {
		s.release()
		return s.ctxErr(ctx, err)
	}
	s.unbind() // deliveries are not bound to the subscribing context
	s.str.SetDeadline(time.Time{})
	return nil
}

type subResult struct {
	s   *call
	err error
}

// resubscribe subscribes again on conn, a new connection, and hands the stream to Recv. A
// failure because conn ended too leaves the subscription to the next reconnection; any other
// failure (such as a permission refusal) ends the subscription with it.
func (sub *Subscription) resubscribe(conn *quic.Conn) {
	sub.c.mu.Lock()
	_, live := sub.c.subs[sub]
	sub.c.mu.Unlock()
	sub.mu.Lock()
	if !live || sub.closed.Load() || sub.conn == conn {
		sub.mu.Unlock()
		return
	}
	sub.mu.Unlock()
	s, err := sub.subscribeAgain(conn)
	if err != nil {
		if lost(conn, err) || sub.c.life.Err() != nil || sub.closed.Load() {
			return
		}
		sub.c.log.Warn("rift: subscription could not subscribe again", "pattern", sub.pattern, "queue", sub.queue, "err", err)
		s = nil
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed.Load() {
		if s != nil {
			s.cancel()
		}
		return
	}
	select {
	case old := <-sub.next:
		if old.s != nil {
			old.s.cancel()
		}
	default:
	}
	if s != nil {
		sub.conn = conn
	}
	sub.next <- subResult{s: s, err: err}
	sub.c.log.Debug("rift: subscription subscribed again", "pattern", sub.pattern, "queue", sub.queue)
}

// subscribeAgain opens a stream on conn and subscribes on it. A failure the server did not
// answer (the operation timed out on a slow server, say) is tried again with the reconnection
// backoff, as long as conn lives and the subscription is open; a refusal by the server (an
// *Error) or a lost conn is returned.
func (sub *Subscription) subscribeAgain(conn *quic.Conn) (*call, error) {
	b := backoff.Backoff{Initial: sub.c.reconnectWait, Max: sub.c.maxReconnectWait, Rand: sub.c.rand}
	for n := 0; ; n++ {
		ctx, cancel := sub.c.opContext(sub.c.life, 0)
		s, err := openOn(ctx, conn, subBufSize)
		if err == nil {
			err = subscribeOn(ctx, s, &riftproto.Subscribe{Pattern: sub.pattern, Queue: sub.queue})
		}
		cancel()
		var e *Error
		if err == nil || errors.As(err, &e) || lost(conn, err) || sub.c.life.Err() != nil {
			return s, err
		}
		sub.c.log.Debug("rift: subscribing again failed; trying again", "pattern", sub.pattern, "queue", sub.queue, "err", err)
		select {
		case <-time.After(b.Delay(n)):
		case <-sub.done:
			return nil, ErrClosed
		case <-conn.Context().Done():
			return nil, err
		case <-sub.c.life.Done():
			return nil, err
		}
	}
}

// end records why deliveries ended (the caller holds the turn) and stops resubscribing.
func (sub *Subscription) end(err error) {
	sub.err = err
	if sub.c != nil {
		sub.c.mu.Lock()
		delete(sub.c.subs, sub)
		sub.c.mu.Unlock()
	}
}

// awaitStream waits, within ctx, for the stream of a resubscription (sub.s is nil). terminal
// reports an error that ends the subscription (closed, reconnection gave up, resubscription
// refused), as opposed to ctx ending.
func (sub *Subscription) awaitStream(ctx context.Context) (err error, terminal bool) {
	var r subResult
	select {
	case r = <-sub.next:
	default:
		select {
		case r = <-sub.next:
		case <-sub.done:
			return ErrClosed, true
		case <-sub.c.life.Done():
			return ErrClosed, true
		case <-sub.c.gaveUp:
			sub.c.mu.Lock()
			defer sub.c.mu.Unlock()
			return sub.c.err, true
		case <-ctx.Done():
			return sub.c.waitErr(ctx.Err()), false
		}
	}
	if r.err != nil {
		return r.err, true
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed.Load() {
		r.s.cancel()
		return ErrClosed, true
	}
	sub.s = r.s
	return nil, false
}

// Recv returns the next message. It is cancellation safe: when ctx ends first, no message is
// lost (a partly received one stays buffered), and the next Recv returns it. Concurrent calls
// take turns. After Close, Recv returns ErrClosed.
func (sub *Subscription) Recv(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, err
	}
	select {
	case sub.turn <- struct{}{}:
	default:
		select {
		case sub.turn <- struct{}{}:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
	defer func() { <-sub.turn }()
	for {
		m, err, again := sub.recv(ctx)
		if !again {
			return m, err
		}
	}
}

// recv is one attempt of Recv, which holds the turn; again reports that the stream was lost
// with its connection and replaced (or is being replaced): try again.
func (sub *Subscription) recv(ctx context.Context) (Message, error, bool) {
	if sub.err == nil && sub.closed.Load() {
		sub.err = ErrClosed
	}
	if sub.err != nil {
		return Message{}, sub.err, false
	}
	if sub.s == nil {
		if err, terminal := sub.awaitStream(ctx); err != nil {
			if terminal {
				sub.end(err)
			}
			return Message{}, err, false
		}
	}
	var op riftproto.Opcode
	var body []byte
	var err error
	if sub.s.fr.Ready() || ctx.Done() == nil {
		op, body, err = sub.s.next() // no wait, or nothing to cancel it
	} else {
		op, body, err = sub.nextWithin(ctx)
	}
	if err == nil && op != riftproto.OpMessage {
		err = fmt.Errorf("rift: unexpected %v on a subscription", op)
	}
	if err != nil {
		var e *Error
		switch {
		case sub.closed.Load():
			err = ErrClosed
		case ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded):
			return Message{}, ctx.Err(), false // interrupted by ctx: the stream is still good
		case sub.c.reconnecting() && lost(sub.s.conn, err) && !errors.As(err, &e):
			sub.mu.Lock()
			sub.s.cancel()
			sub.s = nil
			sub.mu.Unlock()
			return Message{}, nil, true
		default:
			err = subscriptionErr(err)
		}
		sub.end(err)
		sub.s.cancel()
		return Message{}, err, false
	}
	m, err := decodeMessage(&sub.r, body)
	if err != nil {
		sub.end(err)
		sub.s.cancel()
	}
	return m, err, false
}

// nextWithin reads the next frame with ctx's deadline and cancellation applied to the stream.
func (sub *Subscription) nextWithin(ctx context.Context) (riftproto.Opcode, []byte, error) {
	sub.dmu.Lock()
	sub.gen++
	gen := sub.gen
	d, _ := ctx.Deadline()
	s := sub.s
	s.str.SetReadDeadline(d)
	sub.dmu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		sub.dmu.Lock()
		if sub.gen == gen { // not a later Recv's read
			s.str.SetReadDeadline(time.Now())
		}
		sub.dmu.Unlock()
	})
	op, body, err := s.next()
	stop()
	sub.dmu.Lock()
	sub.gen++
	s.str.SetReadDeadline(time.Time{})
	sub.dmu.Unlock()
	return op, body, err
}

// Close cancels the subscription (STOP_SENDING and reset on its stream).
func (sub *Subscription) Close() error {
	sub.once.Do(func() {
		sub.mu.Lock()
		sub.closed.Store(true)
		if sub.s != nil {
			sub.s.cancel()
		}
		select {
		case r := <-sub.next:
			if r.s != nil {
				r.s.cancel()
			}
		default:
		}
		close(sub.done)
		sub.mu.Unlock()
		if sub.c != nil {
			sub.c.mu.Lock()
			delete(sub.c.subs, sub)
			sub.c.mu.Unlock()
		}
	})
	return nil
}

// Request sends payload to subject through a private inbox the server creates and returns the
// first reply. timeout (1 ms to 2 min) is the server's wait; the client waits five seconds more.
func (c *Client) Request(ctx context.Context, subject string, payload []byte, timeout time.Duration) (Message, error) {
	if timeout < time.Millisecond || timeout > 120*time.Second {
		return Message{}, errors.New("rift: request timeout must be 1 ms to 120 s")
	}
	var reply Message
	err := c.do(ctx, timeout+RequestAllowance, &riftproto.Request{TimeoutMs: uint32(timeout.Milliseconds()), Subject: subject, Payload: payload},
		func(op riftproto.Opcode, body []byte) (bool, error) {
			if op != riftproto.OpMessage {
				return true, fmt.Errorf("rift: unexpected %v, want MESSAGE", op)
			}
			var err error
			reply, err = message(body)
			return true, err
		})
	return reply, err
}

func subscriptionErr(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Code == riftproto.CodeOperation && e.Message == "slow consumer" {
		return fmt.Errorf("%w (%v)", ErrSlowConsumer, e)
	}
	var se *quic.StreamError
	if errors.As(err, &se) && se.Remote && se.ErrorCode == resetSlowConsumer {
		return ErrSlowConsumer
	}
	return err
}
