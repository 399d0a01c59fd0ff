package rift

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	proto "github.com/filamq/fila/generated/rift"
)

// Message is a live message or a reply. The client owns Payload.
type Message struct {
	Subject string
	Reply   string
	Payload []byte
}

func message(body []byte) (Message, error) {
	var m proto.Message
	if err := m.Decode(body); err != nil {
		return Message{}, err
	}
	return Message{Subject: m.Subject, Reply: m.Reply, Payload: append([]byte(nil), m.Payload...)}, nil
}

// Subscription receives the messages of one SUBSCRIBE stream.
type Subscription struct {
	s    *call
	msgs chan Message
	done chan struct{}
	once sync.Once
	err  error // why deliveries ended; set before msgs is closed
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
	s, err := c.openStream(ctx)
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
	s.stop() // deliveries are not bound to the subscribing context
	s.stop = nil
	s.str.SetDeadline(time.Time{})
	sub := &Subscription{s: s, msgs: make(chan Message, 256), done: make(chan struct{})}
	go sub.read()
	return sub, nil
}

// read moves MESSAGE frames to msgs. When the application stops receiving, the channel and then
// QUIC flow control fill up, and the server eventually ends the subscription as a slow consumer.
func (sub *Subscription) read() {
	defer close(sub.msgs)
	for {
		op, body, err := sub.s.next()
		if err == nil && op != proto.OpMessage {
			err = fmt.Errorf("rift: unexpected %v on a subscription", op)
		}
		var m Message
		if err == nil {
			m, err = message(body)
		}
		if err != nil {
			sub.err = subscriptionErr(err)
			return
		}
		select {
		case sub.msgs <- m:
		case <-sub.done:
			sub.err = ErrClosed
			return
		}
	}
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
// lost, and the next Recv returns it.
func (sub *Subscription) Recv(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, err
	}
	select {
	case m, ok := <-sub.msgs:
		if !ok {
			return Message{}, sub.err
		}
		return m, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Close cancels the subscription (STOP_SENDING and reset on its stream).
func (sub *Subscription) Close() error {
	sub.once.Do(func() {
		close(sub.done)
		sub.s.release()
	})
	return nil
}

// Publisher is one publisher stream: publications on it are routed in order. It is safe for
// concurrent use, but becomes unusable (ErrBroken) after any failed or cancelled operation.
type Publisher struct {
	c   *Client
	mu  sync.Mutex
	s   *call
	buf []byte
	err error
}

// Publisher opens a publisher stream.
func (c *Client) Publisher(ctx context.Context) (*Publisher, error) {
	ctx, cancel := c.opContext(ctx, 0)
	defer cancel()
	s, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	s.stop()
	s.stop = nil
	s.str.SetDeadline(time.Time{})
	return &Publisher{c: c, s: s}, nil
}

// run performs one operation on the stream under ctx; any failure breaks the publisher.
func (p *Publisher) run(ctx context.Context, f func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return fmt.Errorf("%w: %v", ErrBroken, p.err)
	}
	ctx, cancel := p.c.opContext(ctx, 0)
	defer cancel()
	if err := ctx.Err(); err != nil { // cancelled before it started: still the end of this publisher
		p.err = err
		p.s.release()
		return err
	}
	p.s.bind(ctx)
	defer func() { p.s.stop(); p.s.stop = nil; p.s.str.SetDeadline(time.Time{}) }()
	if err := f(); err != nil {
		p.err = p.c.ctxErr(ctx, err)
		p.s.release()
		return p.err
	}
	return nil
}

// Publish sends a message without waiting for an answer; Flush confirms it. reply is "" or a
// literal _INBOX.<...> subject the identity may subscribe to.
func (p *Publisher) Publish(ctx context.Context, subject, reply string, payload []byte) error {
	f := &proto.Publish{Subject: subject, Reply: reply, Payload: payload}
	if err := f.Check(); err != nil {
		return fmt.Errorf("rift: publish: %w", err)
	}
	return p.run(ctx, func() error {
		p.buf = proto.AppendFrame(p.buf[:0], f)
		return p.s.write(p.buf)
	})
}

// PublishAck publishes and waits until the broker has routed the message.
func (p *Publisher) PublishAck(ctx context.Context, subject, reply string, payload []byte) error {
	f := &proto.PublishAck{Subject: subject, Reply: reply, Payload: payload}
	if err := f.Check(); err != nil {
		return fmt.Errorf("rift: publish: %w", err)
	}
	return p.run(ctx, func() error {
		p.buf = proto.AppendFrame(p.buf[:0], f)
		if err := p.s.write(p.buf); err != nil {
			return err
		}
		_, err := p.s.expectOk()
		return err
	})
}

// Flush sends a PING and waits for its OK: every earlier publication on this stream was routed by
// the broker (which does not mean processed by subscribers). A refused publication surfaces here
// as an *Error.
func (p *Publisher) Flush(ctx context.Context) error {
	return p.run(ctx, func() error {
		if err := p.s.write(proto.AppendFrame(p.buf[:0], &proto.Ping{})); err != nil {
			if _, _, rerr := p.s.next(); rerr != nil { // the server's ERROR explains the failed write
				var e *Error
				if errors.As(rerr, &e) {
					return rerr
				}
			}
			return err
		}
		_, err := p.s.expectOk()
		return err
	})
}

// Err returns why the publisher is unusable, or nil.
func (p *Publisher) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close finishes the publisher stream.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = ErrClosed
		p.s.str.Close()
		p.s.str.CancelRead(0)
	}
	return nil
}

// Publish publishes on the client's shared publisher stream, opening a new stream when the
// previous one failed. It never retries: a failed publication may or may not have reached the
// broker.
func (c *Client) Publish(ctx context.Context, subject, reply string, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shared == nil || c.shared.Err() != nil {
		p, err := c.Publisher(ctx)
		if err != nil {
			return err
		}
		c.shared = p
	}
	return c.shared.Publish(ctx, subject, reply, payload)
}

// Flush flushes the shared publisher (see Publisher.Flush).
func (c *Client) Flush(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shared == nil {
		return nil
	}
	return c.shared.Flush(ctx)
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
