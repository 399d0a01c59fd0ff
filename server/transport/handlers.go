package transport

import (
	"fmt"
	"strconv"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/session"
)

// handle dispatches one complete request; it reports whether the connection stays open.
func (c *conn) handle(h fibp.Header, body []byte) bool {
	c.logRequest(h, body)
	switch h.Opcode {
	case fibp.OpPing:
		c.send(h.RequestID, &fibp.Pong{})
	case fibp.OpPong:
		if h.RequestID == c.pingID.Load() {
			c.pingSentAt.Store(0)
		}
	case fibp.OpDisconnect:
		return false
	case fibp.OpEnqueue:
		c.enqueue(h, body)
	case fibp.OpAck:
		c.settleAck(h, body)
	case fibp.OpNack:
		c.settleNack(h, body)
	case fibp.OpExtendLease:
		c.settleExtend(h, body)
	case fibp.OpConsume:
		c.consume(h, body)
	case fibp.OpCredit:
		var cr fibp.Credit
		if c.decode(h, &cr, body) {
			if ref, ok := c.subs[h.RequestID]; ok {
				c.s.b.Credit(ref.queue, ref.consumer, cr.AdditionalCredit)
			}
		}
	case fibp.OpCancelConsume:
		if ref, ok := c.subs[h.RequestID]; ok {
			delete(c.subs, h.RequestID)
			c.s.b.Unsubscribe(ref.queue, ref.consumer)
		}
	case fibp.OpHandshake:
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, "the handshake is already done", nil)
	default:
		if handler, ok := session.Admin(h.Opcode); ok {
			c.admin(h, body, handler)
			return true
		}
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, fmt.Sprintf("%v is not a request this server accepts", h.Opcode), nil)
	}
	return true
}

// decode decodes a request body, answering InvalidFrame when it is malformed.
func (c *conn) decode(h fibp.Header, f fibp.Frame, body []byte) bool {
	if err := f.Decode(body); err != nil {
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, err.Error(), nil)
		return false
	}
	return true
}

func (c *conn) enqueue(h fibp.Header, body []byte) {
	if !c.decode(h, &c.enq, body) {
		return
	}
	c.begin()
	id := h.RequestID
	c.s.b.Enqueue(session.Messages(&c.enq), func(rs []broker.EnqueueResult, e *broker.Error) {
		if e != nil {
			c.sendBrokerError(id, e)
		} else {
			for _, r := range rs {
				c.s.countCode(r.Code)
			}
			c.send(id, session.EnqueueResult(rs))
		}
		c.end()
	})
}

// codesAnswer returns the callback that sends an Ack's or Nack's result or error.
func codesAnswer[R fibp.Frame](c *conn, requestID uint32, frame func([]broker.Code) R) func([]broker.Code, *broker.Error) {
	return func(codes []broker.Code, e *broker.Error) {
		if e != nil {
			c.sendBrokerError(requestID, e)
		} else {
			for _, code := range codes {
				c.s.countCode(code)
			}
			c.send(requestID, frame(codes))
		}
		c.end()
	}
}

func (c *conn) settleAck(h fibp.Header, body []byte) {
	if c.decode(h, &c.ack, body) {
		c.begin()
		c.ackItems = session.AckItems(c.ackItems[:0], &c.ack)
		c.s.b.Ack(c.ackItems, codesAnswer(c, h.RequestID, session.AckResult))
	}
}

func (c *conn) settleNack(h fibp.Header, body []byte) {
	if c.decode(h, &c.nack, body) {
		c.begin()
		c.nackItems = session.NackItems(c.nackItems[:0], &c.nack)
		c.s.b.Nack(c.nackItems, codesAnswer(c, h.RequestID, session.NackResult))
	}
}

func (c *conn) settleExtend(h fibp.Header, body []byte) {
	if c.decode(h, &c.ext, body) {
		c.begin()
		c.extItems = session.ExtendItems(c.extItems[:0], &c.ext)
		id := h.RequestID
		c.s.b.ExtendLease(c.extItems, func(rs []broker.ExtendResult, e *broker.Error) {
			if e != nil {
				c.sendBrokerError(id, e)
			} else {
				for _, r := range rs {
					c.s.countCode(r.Code)
				}
				c.send(id, session.ExtendLeaseResult(rs))
			}
			c.end()
		})
	}
}

func (c *conn) consume(h fibp.Header, body []byte) {
	var req fibp.Consume
	if !c.decode(h, &req, body) {
		return
	}
	if _, dup := c.subs[h.RequestID]; dup {
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, fmt.Sprintf("request ID %d already names a subscription on this connection", h.RequestID), nil)
		return
	}
	if len(c.subs) >= c.s.opts.MaxSubscriptions {
		c.sendError(h.RequestID, fibp.CodeChannelFull, fmt.Sprintf("at most %d subscriptions per connection", c.s.opts.MaxSubscriptions),
			map[string]string{fibp.MetaRetryAfterMs: "1000"})
		return
	}
	consumer := strconv.FormatUint(c.id, 10) + "-" + strconv.FormatUint(uint64(h.RequestID), 10)
	sub, e := session.Subscription(&req, h.RequestID, consumer, c.caps.Has(fibp.CapCreditFlowControl))
	if e == nil {
		e = c.s.b.Subscribe(sub, session.Sink{Out: c})
	}
	if e != nil {
		c.sendBrokerError(h.RequestID, e)
		return
	}
	c.subs[h.RequestID] = subRef{queue: req.Queue, consumer: consumer}
}

func (c *conn) admin(h fibp.Header, body []byte, handler session.AdminHandler) {
	res, e, err := handler(c.s.b, session.Node{ID: c.s.opts.NodeID, Addr: c.s.advertised()}, body)
	if err != nil {
		c.log.Info("admin request malformed", "op", h.Opcode.String(), "err", err)
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, err.Error(), nil)
		return
	}
	c.logAdmin(h.Opcode, e)
	switch {
	case res == nil && e != nil:
		c.sendBrokerError(h.RequestID, e)
	default:
		if e != nil {
			c.s.countCode(e.Code)
		}
		c.send(h.RequestID, res)
	}
}

// advertised is the address clients should use for this node.
func (s *Server) advertised() string {
	if a := s.Addr(); a != nil {
		return a.String()
	}
	return ""
}
