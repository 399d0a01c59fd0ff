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
		if handler, ok := adminOps[h.Opcode]; ok {
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

// adminHandler decodes one admin request and runs it.
type adminHandler func(c *conn, body []byte) (fibp.Frame, *broker.Error, error)

func adminOp[T any, P interface {
	*T
	fibp.Frame
}](run func(c *conn, req P) (fibp.Frame, *broker.Error)) adminHandler {
	return func(c *conn, body []byte) (fibp.Frame, *broker.Error, error) {
		req := P(new(T))
		if err := req.Decode(body); err != nil {
			return nil, nil, err
		}
		res, e := run(c, req)
		return res, e, nil
	}
}

func (c *conn) admin(h fibp.Header, body []byte, handler adminHandler) {
	res, e, err := handler(c, body)
	switch {
	case err != nil:
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, err.Error(), nil)
	case res == nil && e != nil:
		c.sendBrokerError(h.RequestID, e)
	default:
		if e != nil {
			c.log.Debug("admin request failed", "op", h.Opcode, "code", e.Code, "msg", e.Message)
		}
		c.send(h.RequestID, res)
	}
}

func notYet(feature string) *broker.Error {
	return &broker.Error{Code: fibp.CodeInternalError, Message: feature + " are not supported by this server yet"}
}

// adminOps maps every admin opcode to its handler.
var adminOps = map[fibp.Opcode]adminHandler{
	fibp.OpCreateQueue: adminOp(func(c *conn, r *fibp.CreateQueue) (fibp.Frame, *broker.Error) { return c.s.b.CreateQueue(r) }),
	fibp.OpDeleteQueue: adminOp(func(c *conn, r *fibp.DeleteQueue) (fibp.Frame, *broker.Error) { return c.s.b.DeleteQueue(r) }),
	fibp.OpUpdateQueue: adminOp(func(c *conn, r *fibp.UpdateQueue) (fibp.Frame, *broker.Error) { return c.s.b.UpdateQueue(r) }),
	fibp.OpGetStats:    adminOp(func(c *conn, r *fibp.GetStats) (fibp.Frame, *broker.Error) { return c.s.b.GetStats(r) }),
	fibp.OpListQueues:  adminOp(func(c *conn, r *fibp.ListQueues) (fibp.Frame, *broker.Error) { return c.s.b.ListQueues(r) }),
	fibp.OpSetConfig:   adminOp(func(c *conn, r *fibp.SetConfig) (fibp.Frame, *broker.Error) { return c.s.b.SetConfig(r) }),
	fibp.OpGetConfig:   adminOp(func(c *conn, r *fibp.GetConfig) (fibp.Frame, *broker.Error) { return c.s.b.GetConfig(r) }),
	fibp.OpListConfig:  adminOp(func(c *conn, r *fibp.ListConfig) (fibp.Frame, *broker.Error) { return c.s.b.ListConfig(r) }),
	fibp.OpRedrive:     adminOp(func(c *conn, r *fibp.Redrive) (fibp.Frame, *broker.Error) { return c.s.b.Redrive(r) }),
	fibp.OpGetClusterStatus: adminOp(func(c *conn, r *fibp.GetClusterStatus) (fibp.Frame, *broker.Error) {
		res, e := c.s.b.GetClusterStatus(r)
		for i := range res.Nodes {
			res.Nodes[i].NodeID, res.Nodes[i].Addr = c.s.opts.NodeID, c.s.advertised()
		}
		return res, e
	}),
	fibp.OpGetRoutes: adminOp(func(c *conn, r *fibp.GetRoutes) (fibp.Frame, *broker.Error) {
		return c.s.b.GetRoutes(r, c.s.advertised())
	}),
	fibp.OpGetThrottleStats: adminOp(func(c *conn, r *fibp.GetThrottleStats) (fibp.Frame, *broker.Error) {
		return &fibp.GetThrottleStatsResult{ErrorCode: fibp.CodeThrottleNotFound}, nil
	}),
	fibp.OpGetThrottleBucket: adminOp(func(c *conn, r *fibp.GetThrottleBucket) (fibp.Frame, *broker.Error) {
		return &fibp.GetThrottleBucketResult{ErrorCode: fibp.CodeThrottleNotFound}, nil
	}),
	fibp.OpDrainNode: adminOp(func(c *conn, r *fibp.DrainNode) (fibp.Frame, *broker.Error) {
		if r.NodeID != c.s.opts.NodeID {
			return &fibp.DrainNodeResult{ErrorCode: fibp.CodeNodeNotFound}, nil
		}
		return &fibp.DrainNodeResult{ErrorCode: fibp.CodeOk}, nil // a single node has no other node to move leaders to
	}),
	fibp.OpMoveQueueLeader: adminOp(func(c *conn, r *fibp.MoveQueueLeader) (fibp.Frame, *broker.Error) {
		if st, _ := c.s.b.GetStats(&fibp.GetStats{Queue: r.Queue}); st.ErrorCode != fibp.CodeOk {
			return &fibp.MoveQueueLeaderResult{ErrorCode: st.ErrorCode}, nil
		}
		if r.TargetNodeID != c.s.opts.NodeID {
			return &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeNodeNotFound}, nil
		}
		return &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeOk}, nil
	}),
	fibp.OpSetRebalancing: adminOp(func(c *conn, r *fibp.SetRebalancing) (fibp.Frame, *broker.Error) { return c.s.b.SetRebalancing(r) }),
	fibp.OpCreateApiKey:   adminOp(func(c *conn, r *fibp.CreateApiKey) (fibp.Frame, *broker.Error) { return nil, notYet("API keys") }),
	fibp.OpRevokeApiKey:   adminOp(func(c *conn, r *fibp.RevokeApiKey) (fibp.Frame, *broker.Error) { return nil, notYet("API keys") }),
	fibp.OpListApiKeys:    adminOp(func(c *conn, r *fibp.ListApiKeys) (fibp.Frame, *broker.Error) { return nil, notYet("API keys") }),
	fibp.OpSetAcl:         adminOp(func(c *conn, r *fibp.SetAcl) (fibp.Frame, *broker.Error) { return nil, notYet("ACLs") }),
	fibp.OpGetAcl:         adminOp(func(c *conn, r *fibp.GetAcl) (fibp.Frame, *broker.Error) { return nil, notYet("ACLs") }),
}

// advertised is the address clients should use for this node.
func (s *Server) advertised() string {
	if a := s.Addr(); a != nil {
		return a.String()
	}
	return ""
}
