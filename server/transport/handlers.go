package transport

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/session"
)

// handle dispatches one complete request; it reports whether the connection stays open.
func (c *conn) handle(h fibp.Header, body []byte) bool {
	c.logRequest(h, body)
	c.dropEnded() // the consumer may answer an ended subscription's Error before the wake lands
	if h.Opcode != fibp.OpPong && h.Opcode != fibp.OpDisconnect && !c.authorized(h) {
		return false
	}
	if c.stale(h) {
		return true
	}
	if h.Opcode != fibp.OpPing && h.Opcode != fibp.OpPong && h.Opcode != fibp.OpCreateQueue {
		c.creates.Wait() // after the admin requests before it (adminasync.go)
		c.admins.Wait()
	}
	switch h.Opcode {
	case fibp.OpAck, fibp.OpNack, fibp.OpExtendLease:
		c.consumes.Wait() // the subscriptions their leases belong to (consumeaside.go)
	}
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
			if ref := c.sub(h.RequestID); ref != nil {
				ref.sub.Credit(cr.AdditionalCredit)
			}
		}
	case fibp.OpCancelConsume:
		if ref, ok := c.subs[h.RequestID]; ok {
			c.endSubscription(h.RequestID, ref)
		}
	case fibp.OpHandshake:
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, "the handshake is already done", nil)
	default:
		if handler, ok := session.Admin(h.Opcode); ok {
			c.adminAside(h, body, handler) // adminasync.go
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

// reserve takes n bytes of the connection's memory for a request, answering it when a bound
// refuses them.
func (c *conn) reserve(requestID uint32, n int64) bool {
	if err := c.acct.Reserve(n); err != nil {
		c.sendMemoryError(requestID, err)
		return false
	}
	return true
}

// decodeHeld reserves the memory a hot-path request holds until it is answered (mem, known from
// the body before decoding) and decodes it; it returns the bytes reserved and whether the
// request goes on.
func (c *conn) decodeHeld(h fibp.Header, f fibp.Frame, body []byte, mem int64) (int64, bool) {
	if !c.reserve(h.RequestID, mem) {
		return 0, false
	}
	if !c.decode(h, f, body) {
		c.acct.Release(mem)
		return 0, false
	}
	return mem, true
}

// decodeEnqueue decodes an Enqueue whose header maps may take at most the memory the connection
// can still hold, answering the request when it cannot be decoded.
func (c *conn) decodeEnqueue(h fibp.Header, body []byte) bool {
	if c.acct == nil {
		return c.decode(h, &c.enq, body)
	}
	c.rd.Reset(body)
	c.rd.Allow(c.acct.Limit() - c.acct.Used())
	c.enq.DecodeFrom(&c.rd)
	err := c.rd.Err()
	c.rd.Reset(nil) // the reader must not keep the body alive
	switch {
	case err == nil:
		return true
	case errors.Is(err, wire.ErrMemory):
		c.sendError(h.RequestID, fibp.CodeChannelFull, fmt.Sprintf("the Enqueue's headers need more memory than the connection may still hold (%d of %d bytes held); retry with fewer",
			c.acct.Used(), c.acct.Limit()), map[string]string{fibp.MetaRetryAfterMs: retryAfterMemory})
	default:
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, (&fibp.FrameError{Opcode: fibp.OpEnqueue, Err: err}).Error(), nil)
	}
	return false
}

func (c *conn) enqueue(h fibp.Header, body []byte) {
	mem := session.EnqueueMemory(body)
	if !c.reserve(h.RequestID, mem) {
		return
	}
	if !c.decodeEnqueue(h, body) {
		c.acct.Release(mem)
		return
	}
	if c.acct != nil {
		headers := session.HeadersMemory(&c.enq)
		if !c.reserve(h.RequestID, headers) {
			c.acct.Release(mem)
			return
		}
		mem += headers
	}
	screened(c, h.RequestID, mem, auth.Produce, true, session.Messages(&c.enq), func(m *service.Message) string { return m.Queue },
		service.EnqueueResult{Code: service.CodeForbidden}, func(r service.EnqueueResult) service.Code { return r.Code },
		session.EnqueueResult, c.s.svc.Enqueue)
}

// screened runs a request whose items each need permission kind: the denied ones (screen)
// answer forbidden without reaching the broker, the rest go to run, whose per-item results (or
// error) are sent as frame; mem bytes of the connection's memory are held until it is answered.
// With whole, a request whose every item is denied is answered with one Forbidden Error frame
// that names the key, the permission and the queues, which a per-item result cannot carry.
func screened[T, Res any, F fibp.Frame](c *conn, requestID uint32, mem int64, kind auth.Kind, whole bool, items []T, queue func(*T) string,
	forbidden Res, code func(Res) service.Code, frame func([]Res) F, run func([]T, func([]Res, *service.Error))) {
	kept, denied := screen(c.who, kind, items, queue)
	if allDenied(kept, denied) {
		c.acct.Release(mem)
		if whole {
			forbiddenAll(c, requestID, kind, items, queue)
		} else {
			c.send(requestID, frame(unscreen(denied, nil, forbidden)))
		}
		return
	}
	if !c.begin(mem) {
		return
	}
	run(kept, func(rs []Res, e *service.Error) {
		if e != nil {
			c.sendServiceError(requestID, e)
		} else {
			rs = unscreen(denied, rs, forbidden)
			for _, r := range rs {
				c.s.countCode(code(r))
			}
			c.send(requestID, frame(rs))
		}
		c.acct.Release(mem)
		c.end()
	})
}

// itself is the code of a settlement item's result, which is its code.
func itself(code service.Code) service.Code { return code }

func (c *conn) settleAck(h fibp.Header, body []byte) {
	if mem, ok := c.decodeHeld(h, &c.ack, body, session.SettleMemory(body)); ok {
		c.ackItems = session.AckItems(c.ackItems[:0], &c.ack, c.session)
		screened(c, h.RequestID, mem, auth.Consume, false, c.ackItems, func(it *service.AckItem) string { return it.Queue },
			service.CodeForbidden, itself, session.AckResult, c.s.svc.Ack)
	}
}

func (c *conn) settleNack(h fibp.Header, body []byte) {
	if mem, ok := c.decodeHeld(h, &c.nack, body, session.SettleMemory(body)); ok {
		c.nackItems = session.NackItems(c.nackItems[:0], &c.nack, c.session)
		screened(c, h.RequestID, mem, auth.Consume, false, c.nackItems, func(it *service.NackItem) string { return it.Queue },
			service.CodeForbidden, itself, session.NackResult, c.s.svc.Nack)
	}
}

func (c *conn) settleExtend(h fibp.Header, body []byte) {
	mem, ok := c.decodeHeld(h, &c.ext, body, session.SettleMemory(body))
	if !ok {
		return
	}
	c.extItems = session.ExtendItems(c.extItems[:0], &c.ext, c.session)
	screened(c, h.RequestID, mem, auth.Consume, false, c.extItems, func(it *service.ExtendItem) string { return it.Queue },
		service.ExtendResult{Code: service.CodeForbidden}, func(r service.ExtendResult) service.Code { return r.Code },
		session.ExtendLeaseResult, c.s.svc.ExtendLease)
}

// subscriptionMemory is what a subscription is counted for against the memory bounds while it
// lives: its entries in the connection, the broker and the queue (about 350 bytes), rounded up.
const subscriptionMemory = 1 << 10

func (c *conn) consume(h fibp.Header, body []byte) {
	var req fibp.Consume
	if !c.decode(h, &req, body) {
		return
	}
	if !c.who.Allowed(auth.Consume, req.Queue) {
		c.forbidden(h.RequestID, auth.Consume, req.Queue)
		return
	}
	if name, ok := session.DeniedThrottle(c.who, req.Throttles); !ok {
		c.forbidden(h.RequestID, auth.Throttle, name)
		return
	}
	if h.RequestID == 0 || h.RequestID&serverInitiated != 0 {
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, fmt.Sprintf("request ID %#x is not client-initiated (1 to 0x7FFFFFFF): Delivery frames carry the Consume's request ID", h.RequestID), nil)
		return
	}
	if c.sub(h.RequestID) != nil {
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, fmt.Sprintf("request ID %d already names a subscription on this connection", h.RequestID), nil)
		return
	}
	if len(c.subs) >= c.s.opts.MaxSubscriptions && c.forgetFailed() >= c.s.opts.MaxSubscriptions {
		c.sendError(h.RequestID, fibp.CodeChannelFull, fmt.Sprintf("at most %d subscriptions per connection", c.s.opts.MaxSubscriptions),
			map[string]string{fibp.MetaRetryAfterMs: "1000"})
		return
	}
	if !c.reserve(h.RequestID, subscriptionMemory) {
		return
	}
	consumer := c.session + "-" + strconv.FormatUint(uint64(h.RequestID), 10)
	sr := session.SubscribeRequest(&req, c.session, consumer, c.caps.Has(fibp.CapCreditFlowControl))
	if c.who != nil {
		sr.Holder = c.who.ID() // the throttles' fair share of bucket memory
	}
	c.subscribeAside(h.RequestID, req.Queue, sr) // consumeaside.go
}

// subscriptionEnded hands a subscription the broker ended to the reader, and wakes it.
func (c *conn) subscriptionEnded(ref *subRef) {
	c.endedMu.Lock()
	c.ended = append(c.ended, ref)
	c.endedMu.Unlock()
	c.hasEnded.Store(true)
	c.wakeReader()
}

// dropEnded forgets the subscriptions the broker ended, giving back their memory. A request ID
// that names a newer subscription meanwhile (cancelled and consumed again) keeps it.
func (c *conn) dropEnded() {
	if !c.hasEnded.Load() {
		return
	}
	c.endedMu.Lock()
	ended := c.ended
	c.ended = nil
	c.hasEnded.Store(false)
	c.endedMu.Unlock()
	for _, ref := range ended {
		if c.subs[ref.id] == ref {
			delete(c.subs, ref.id)
			c.acct.Release(subscriptionMemory)
		}
	}
}

// answerAdmin answers an admin request with what its handler returned, filtered for who.
func (c *conn) answerAdmin(h fibp.Header, who *auth.Principal, res fibp.Frame, e *service.Error, err error) {
	if err != nil {
		c.log.Info("admin request malformed", "op", h.Opcode.String(), "err", err)
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, err.Error(), nil)
		return
	}
	c.logAdmin(h.Opcode, e)
	switch {
	case res == nil && e != nil:
		c.sendServiceError(h.RequestID, e)
	default:
		if e != nil {
			c.s.countCode(e.Code)
		}
		session.Filter(who, res)
		c.send(h.RequestID, res)
	}
}

// advertised is the address clients should use for this node.
func (s *Server) advertised() string {
	if s.opts.Advertise != "" {
		return s.opts.Advertise
	}
	if a := s.Addr(); a != nil {
		return a.String()
	}
	return ""
}
