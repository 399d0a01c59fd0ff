package fila

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// outbox collects encoded frames until the writer takes them all in one write (coalescing:
// frames queued while a write is in progress go out together in the next one).
type outbox struct {
	mu    sync.Mutex
	buf   []byte
	spare []byte

	wake        chan struct{} // capacity 1: "there is something to write"
	writerDone  chan struct{}
	creditDirty atomic.Bool // some subscription is owed credit
}

// maxSpareBuffer is the largest write buffer kept for reuse after a write.
const maxSpareBuffer = 4 << 20

func (o *outbox) init() {
	o.wake = make(chan struct{}, 1)
	o.writerDone = make(chan struct{})
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// appendFrame encodes fr with request ID id, split into continuation frames when its body is
// larger than maxFrame allows.
func (o *outbox) appendFrame(id uint32, fr fibp.Frame, maxFrame int) {
	size := fibp.HeaderSize + fr.Size()
	o.mu.Lock()
	if size <= maxFrame {
		o.buf = fibp.AppendFrame(o.buf, 0, id, fr)
	} else {
		body := fr.AppendTo(make([]byte, 0, size-fibp.HeaderSize))
		o.buf = fibp.AppendContinued(o.buf, fr.Opcode(), id, body, maxFrame)
	}
	o.mu.Unlock()
	o.signal()
}

// take removes everything queued, leaving the spare buffer in its place.
func (o *outbox) take() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.buf
	o.buf, o.spare = o.spare[:0], nil
	return b
}

// recycle offers a written buffer for reuse.
func (o *outbox) recycle(b []byte) {
	if cap(b) > maxSpareBuffer {
		return
	}
	o.mu.Lock()
	if o.spare == nil {
		o.spare = b[:0]
	}
	o.mu.Unlock()
}

// sendOn queues one frame that expects no answer on l (Pong, CancelConsume), unless l is over.
func (c *Client) sendOn(l *link, id uint32, fr fibp.Frame) error {
	select {
	case <-l.done:
		return c.closedErr()
	default:
	}
	l.out.appendFrame(id, fr, l.maxFrame)
	return nil
}

func (c *Client) writeLoop(l *link) {
	defer close(l.out.writerDone)
	for {
		select {
		case <-l.out.wake:
		case <-l.done:
			c.flush(l) // the last flush carries a graceful Close's Disconnect
			return
		}
		if err := c.flush(l); err != nil {
			c.linkLost(l, connLost(err))
			return
		}
	}
}

func (c *Client) flush(l *link) error {
	if l.out.creditDirty.Swap(false) {
		for _, g := range c.collectCredits(l) {
			l.out.appendFrame(g.id, &fibp.Credit{AdditionalCredit: g.n}, l.maxFrame)
		}
	}
	b := l.out.take()
	if len(b) == 0 {
		l.out.recycle(b)
		return nil
	}
	if c.opts.WriteTimeout > 0 {
		l.conn.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
	}
	_, err := l.conn.Write(b)
	l.out.recycle(b)
	return err
}

func (c *Client) readLoop(l *link) {
	for {
		raw, err := l.fr.Next()
		if err != nil {
			var fse *wire.FrameSizeError
			if errors.As(err, &fse) && c.skipOversized(l, fse) == nil {
				continue
			}
			c.linkLost(l, connLost(err))
			return
		}
		h, rest, err := fibp.ParseHeader(raw)
		if err != nil {
			continue // cannot happen: the reader refuses bodies shorter than a header
		}
		body, done, err := l.reasm.Add(h, rest)
		if err != nil {
			c.failRequest(l, h.RequestID, invalidFrame("%v from server: %v", h.Opcode, err))
			continue
		}
		if done {
			c.dispatch(l, h, body)
		}
	}
}

// skipOversized discards a frame larger than the receive limit and fails its request.
func (c *Client) skipOversized(l *link, fse *wire.FrameSizeError) error {
	head, err := l.fr.Skip(fibp.HeaderSize)
	if err != nil {
		return err
	}
	if h, _, err := fibp.ParseHeader(head); err == nil {
		c.failRequest(l, h.RequestID, invalidFrame("%v frame of %d bytes exceeds the limit of %d",
			h.Opcode, fse.Length, fse.Max))
	}
	return nil
}

// dispatch routes one complete frame received on l. body aliases the reader's buffer:
// everything kept must be decoded (strings are copied by the decoder) or copied before dispatch
// returns. Frames of a link that is no longer live reach no subscription.
func (c *Client) dispatch(l *link, h fibp.Header, body []byte) {
	switch {
	case h.Opcode == fibp.OpDisconnect:
		c.linkLost(l, ErrServerDisconnected)
		return
	case h.RequestID&serverInitiated != 0:
		if h.Opcode == fibp.OpPing {
			c.sendOn(l, h.RequestID, &fibp.Pong{})
		}
		return // other server-initiated frames are extensions we do not know: ignore
	case h.Opcode == fibp.OpDelivery:
		c.deliver(l, h.RequestID, body)
		return
	}
	c.mu.Lock()
	cl := l.pending[h.RequestID]
	delete(l.pending, h.RequestID)
	var sub *Consumer
	if c.cur.Load() == l {
		sub = c.subs[h.RequestID]
	}
	c.mu.Unlock()
	if cl != nil {
		cl.ch <- decodeResponse(cl, h.Opcode, body)
		return
	}
	if sub != nil && h.Opcode == fibp.OpError {
		var ef fibp.Error
		if err := ef.Decode(body); err == nil {
			sub.fail(errorFromFrame(&ef))
		}
	}
	// Anything else answers nothing we wait for (a request given up on, or an unknown
	// server extension): ignore it.
}

func (c *Client) failRequest(l *link, id uint32, err error) {
	c.mu.Lock()
	cl := l.pending[id]
	delete(l.pending, id)
	c.mu.Unlock()
	if cl != nil {
		cl.ch <- response{err: err}
	}
}

// decodeResponse turns the answer to cl into a frame or an error. An Error frame becomes an
// *Error; an unknown or unexpected opcode fails the request with InvalidFrame, as the spec's
// "Handling Unknown Opcodes" requires.
func decodeResponse(cl *call, op fibp.Opcode, body []byte) response {
	switch {
	case op == fibp.OpError:
		var ef fibp.Error
		if err := ef.Decode(body); err != nil {
			return response{err: invalidFrame("Error frame: %v", err)}
		}
		return response{err: errorFromFrame(&ef)}
	case !op.Known():
		return response{err: invalidFrame("unknown opcode %v in answer to %v", op, cl.op)}
	case op != cl.want:
		return response{err: invalidFrame("unexpected %v in answer to %v", op, cl.op)}
	}
	fr, err := fibp.Decode(op, body)
	if err != nil {
		return response{err: invalidFrame("%v", err)}
	}
	return response{frame: fr}
}
