package fila

import (
	"context"
	"fmt"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// call is one request waiting for its answer.
type call struct {
	id   uint32
	op   fibp.Opcode   // the request's opcode, for messages
	want fibp.Opcode   // the result opcode that answers it
	ch   chan response // capacity 1; exactly one response is ever sent
	l    *link         // the connection it was sent on
}

type response struct {
	frame fibp.Frame
	err   error
}

// allocID returns the next free client request ID of l: 1..0x7FFFFFFF, wrapping before bit
// 31, and skipping IDs still pending or held by a subscription. c.mu must be held.
func (c *Client) allocID(l *link) uint32 {
	for {
		c.nextID++
		if c.nextID >= serverInitiated {
			c.nextID = 1
		}
		id := c.nextID
		if _, busy := l.pending[id]; busy {
			continue
		}
		if _, busy := c.subs[id]; busy {
			continue
		}
		return id
	}
}

// start checks and queues req under a fresh request ID of the live link and registers it as
// pending. When sub is non-nil it is registered as the subscription of that ID (Consume). The
// frame is in the outbox when start returns, so anything queued afterwards is written after it.
//
// While the client is reconnecting, start waits for the next link; when ctx ends first it
// returns a *ReconnectError (the request was not sent). A stopped client fails at once.
func (c *Client) start(ctx context.Context, req fibp.Frame, want fibp.Opcode, sub *Consumer) (*call, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("fila: %v: %w", req.Opcode(), err)
	}
	cl := &call{op: req.Opcode(), want: want, ch: make(chan response, 1)}
	for {
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return nil, err
		}
		if l := c.cur.Load(); l != nil {
			cl.id, cl.l = c.allocID(l), l
			l.pending[cl.id] = cl
			if sub != nil {
				sub.rebind(cl.id, l.caps.Has(fibp.CapCreditFlowControl))
				c.subs[cl.id] = sub
			}
			c.mu.Unlock()
			l.out.appendFrame(cl.id, req, l.maxFrame)
			return cl, nil
		}
		up := c.up
		c.mu.Unlock()
		select {
		case <-up:
		case <-c.done:
		case <-ctx.Done():
			return nil, c.waitErr(ctx.Err())
		}
	}
}

// await waits for the answer to cl. When ctx ends first, the request is forgotten: a late
// answer is ignored.
func (c *Client) await(ctx context.Context, cl *call) (fibp.Frame, error) {
	select {
	case r := <-cl.ch:
		return r.frame, r.err
	case <-ctx.Done():
		c.forget(cl)
		return nil, ctx.Err()
	}
}

func (c *Client) forget(cl *call) {
	c.mu.Lock()
	delete(cl.l.pending, cl.id)
	c.mu.Unlock()
}

// roundTrip sends req and waits for its answer of the result type PT.
func roundTrip[T any, PT interface {
	*T
	fibp.Frame
}](ctx context.Context, c *Client, req fibp.Frame) (PT, error) {
	cl, err := c.start(ctx, req, PT(new(T)).Opcode(), nil)
	if err != nil {
		return nil, err
	}
	fr, err := c.await(ctx, cl)
	if err != nil {
		return nil, err
	}
	return fr.(PT), nil // decodeResponse guarantees the opcode, hence the type
}

// Ping sends a Ping and waits for the Pong, returning the round-trip time.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	if _, err := roundTrip[fibp.Pong](ctx, c, &fibp.Ping{}); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}
