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

	proto "github.com/filamq/fila/generated/rift"
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
	var m proto.Message
	r.Reset(body)
	m.DecodeFrom(r)
	r.ExpectEnd()
	if err := r.Err(); err != nil {
		return Message{}, &proto.FrameError{Opcode: proto.OpMessage, Err: err}
	}
	return Message{Subject: m.Subject, Reply: m.Reply, Payload: append([]byte(nil), m.Payload...)}, nil
}

// Subscription receives the messages of one SUBSCRIBE stream. Recv reads them from the stream
// itself: no goroutine and no queue stand between QUIC and the application, whose pace QUIC flow
// control passes on to the server (which ends a subscriber that falls too far behind as a slow
// consumer).
type Subscription struct {
	s      *call
	turn   chan struct{} // (capacity 1) held by the Recv that reads the stream
	r      wire.Reader   // decodes MESSAGE frames, remembering recent subjects
	err    error         // why deliveries ended; guarded by turn
	closed atomic.Bool
	once   sync.Once

	dmu sync.Mutex // orders the read-deadline changes of Recv and of its context's AfterFunc
	gen uint64     // counts Recv calls that bound a context; guarded by dmu
}

// Subscribe subscribes to pattern ("*" matches one token, a final ">" the rest), in queue group
// queue ("" for none). It returns once the server has registered the subscription.
func (c *Client) Subscribe(ctx context.Context, pattern, queue string) (*Subscription, error) {
	req := &proto.Subscribe{Pattern: pattern, Queue: queue}
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("rift: subscribe: %w", err)
	}
	ctx, cancel := c.opContext(ctx, 0)
	defer cancel()
	s, err := c.openLongStream(ctx, subBufSize)
	if err != nil {
		return nil, err
	}
	if err := s.write(proto.AppendFrame(nil, req)); err != nil {
		s.release()
		return nil, c.ctxErr(ctx, err)
	}
	if _, err := s.expectOk(); err != nil {
		s.release()
		return nil, c.ctxErr(ctx, err)
	}
	s.unbind() // deliveries are not bound to the subscribing context
	s.str.SetDeadline(time.Time{})
	return &Subscription{s: s, turn: make(chan struct{}, 1)}, nil
}

func subscriptionErr(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Code == proto.CodeOperation && e.Message == "slow consumer" {
		return fmt.Errorf("%w (%v)", ErrSlowConsumer, e)
	}
	var se *quic.StreamError
	if errors.As(err, &se) && se.Remote && se.ErrorCode == resetSlowConsumer {
		return ErrSlowConsumer
	}
	return err
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
	if sub.err == nil && sub.closed.Load() {
		sub.err = ErrClosed
	}
	if sub.err != nil {
		return Message{}, sub.err
	}
	var op proto.Opcode
	var body []byte
	var err error
	if sub.s.fr.hasFrame() || ctx.Done() == nil {
		op, body, err = sub.s.next() // no wait, or nothing to cancel it
	} else {
		op, body, err = sub.nextWithin(ctx)
	}
	if err == nil && op != proto.OpMessage {
		err = fmt.Errorf("rift: unexpected %v on a subscription", op)
	}
	if err != nil {
		switch {
		case sub.closed.Load():
			err = ErrClosed
		case ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded):
			return Message{}, ctx.Err() // interrupted by ctx: the stream is still good
		default:
			err = subscriptionErr(err)
		}
		sub.err = err
		sub.s.cancel()
		return Message{}, err
	}
	m, err := decodeMessage(&sub.r, body)
	if err != nil {
		sub.err = err
		sub.s.cancel()
	}
	return m, err
}

// nextWithin reads the next frame with ctx's deadline and cancellation applied to the stream.
func (sub *Subscription) nextWithin(ctx context.Context) (proto.Opcode, []byte, error) {
	sub.dmu.Lock()
	sub.gen++
	gen := sub.gen
	d, _ := ctx.Deadline()
	sub.s.str.SetReadDeadline(d)
	sub.dmu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		sub.dmu.Lock()
		if sub.gen == gen { // not a later Recv's read
			sub.s.str.SetReadDeadline(time.Now())
		}
		sub.dmu.Unlock()
	})
	op, body, err := sub.s.next()
	stop()
	sub.dmu.Lock()
	sub.gen++
	sub.s.str.SetReadDeadline(time.Time{})
	sub.dmu.Unlock()
	return op, body, err
}

// Close cancels the subscription (STOP_SENDING and reset on its stream).
func (sub *Subscription) Close() error {
	sub.once.Do(func() {
		sub.closed.Store(true)
		sub.s.cancel()
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
	err := c.do(ctx, timeout+RequestAllowance, &proto.Request{TimeoutMs: uint32(timeout.Milliseconds()), Subject: subject, Payload: payload},
		func(op proto.Opcode, body []byte) (bool, error) {
			if op != proto.OpMessage {
				return true, fmt.Errorf("rift: unexpected %v, want MESSAGE", op)
			}
			var err error
			reply, err = message(body)
			return true, err
		})
	return reply, err
}
