package nodelink

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Forwarding: a node hands the hot-path requests of its clients for queues another node leads
// to that node (ForwardEnqueue, ForwardSettle) and relays the answers. A request is sent at
// once on the connection, behind what was sent on it before, so the requests one node forwards
// to another reach it in the order they were forwarded; the receiver hands each to its handler
// on the connection's reader, in that order, and the handler must not block (the broker's
// Enqueue and settlements only queue work).

// Forwarded is the optional side of a Handler that carries out the requests forwarded to this
// node (the broker). Each method is called on the connection's reader goroutine and must not
// block; req and what it points into are valid only during the call (the broker copies the
// payloads before it returns, as its Enqueue does). answer is called once, from any goroutine.
type Forwarded interface {
	ForwardedEnqueue(req *cluster.ForwardEnqueue, answer func(*cluster.ForwardEnqueueResult))
	ForwardedSettle(req *cluster.ForwardSettle, answer func(*cluster.ForwardSettleResult))
}

// defaultForwardTimeout bounds a forwarded request's answer when Config.ForwardTimeout is 0.
const defaultForwardTimeout = 5 * time.Second

func (l *Link) forwardTimeout() time.Duration {
	if l.cfg.ForwardTimeout > 0 {
		return l.cfg.ForwardTimeout
	}
	return defaultForwardTimeout
}

// ForwardEnqueue hands req to node and calls done once with its answer, or with why there is
// none (node unreachable, the connection broke, no answer within the forward timeout: the
// messages may or may not have been enqueued). done runs on another goroutine and must not
// block. req is encoded before ForwardEnqueue returns.
func (l *Link) ForwardEnqueue(node meta.NodeID, req *cluster.ForwardEnqueue, done func(*cluster.ForwardEnqueueResult, error)) {
	l.forward(node, req, func(op cluster.Opcode, body []byte) (any, error) {
		x := &cluster.ForwardEnqueueResult{}
		return x, expect(op, cluster.OpForwardEnqueueResult, x, body)
	}, func(v any, err error) {
		x, _ := v.(*cluster.ForwardEnqueueResult)
		if err == nil && x.ErrorCode == 0 && len(x.Results) != len(req.Messages) {
			err = &ProtocolError{Msg: fmt.Sprintf("%d results to %d forwarded messages", len(x.Results), len(req.Messages))}
		}
		done(x, err)
	})
}

// ForwardSettle hands req to node as ForwardEnqueue does.
func (l *Link) ForwardSettle(node meta.NodeID, req *cluster.ForwardSettle, done func(*cluster.ForwardSettleResult, error)) {
	l.forward(node, req, func(op cluster.Opcode, body []byte) (any, error) {
		x := &cluster.ForwardSettleResult{}
		return x, expect(op, cluster.OpForwardSettleResult, x, body)
	}, func(v any, err error) {
		x, _ := v.(*cluster.ForwardSettleResult)
		if err == nil && x.ErrorCode == 0 && len(x.Results) != len(req.Items) {
			err = &ProtocolError{Msg: fmt.Sprintf("%d results to %d forwarded items", len(x.Results), len(req.Items))}
		}
		done(x, err)
	})
}

// forward sends req to node; decode reads the answer on the reader's goroutine, and done is
// called once with what it returned, or with the failure.
func (l *Link) forward(node meta.NodeID, req cluster.Frame, decode func(cluster.Opcode, []byte) (any, error), done func(any, error)) {
	c, err := l.connTo(node)
	if err != nil {
		go done(nil, err)
		return
	}
	var once sync.Once
	finish := func(v any, err error) { once.Do(func() { done(v, err) }) }
	var sent atomic.Uint32 // the request's ID once sent
	timeout := l.forwardTimeout()
	timer := time.AfterFunc(timeout, func() {
		c.forget(sent.Load())
		finish(nil, fmt.Errorf("%w: %s did not answer %s within %v", ErrUnreachable, node, req.Opcode(), timeout))
	})
	id, err := c.call(req, func(op cluster.Opcode, body []byte, err error) {
		timer.Stop()
		var v any
		if err == nil {
			v, err = decode(op, body)
		}
		finish(v, err)
	})
	if err != nil {
		timer.Stop()
		go finish(nil, err)
		return
	}
	sent.Store(id)
}

// forwardedEnqueue carries out a peer's ForwardEnqueue (on the reader's goroutine).
func (c *conn) forwardedEnqueue(id uint32, body []byte) error {
	var req cluster.ForwardEnqueue
	if err := req.Decode(body); err != nil {
		return err
	}
	h := c.forwarded()
	if h == nil {
		return c.send(0, id, &cluster.Error{Code: cluster.CodeUnavailable, Message: "node " + string(c.l.cfg.NodeID) + " takes no forwarded requests"})
	}
	h.ForwardedEnqueue(&req, func(x *cluster.ForwardEnqueueResult) { _ = c.send(0, id, x) })
	return nil
}

// forwardedSettle carries out a peer's ForwardSettle (on the reader's goroutine).
func (c *conn) forwardedSettle(id uint32, body []byte) error {
	var req cluster.ForwardSettle
	if err := req.Decode(body); err != nil {
		return err
	}
	h := c.forwarded()
	if h == nil {
		return c.send(0, id, &cluster.Error{Code: cluster.CodeUnavailable, Message: "node " + string(c.l.cfg.NodeID) + " takes no forwarded requests"})
	}
	h.ForwardedSettle(&req, func(x *cluster.ForwardSettleResult) { _ = c.send(0, id, x) })
	return nil
}

// forwarded is the link's handler of forwarded requests (nil while none is set).
func (c *conn) forwarded() Forwarded {
	c.l.mu.Lock()
	h := c.l.handler
	c.l.mu.Unlock()
	f, _ := h.(Forwarded)
	return f
}
