package broker

import (
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/engine"
)

// Error is a request-level failure, sent as an FIBP Error frame.
type Error struct {
	Code     fibp.ErrorCode
	Message  string
	Metadata map[string]string
}

func (e *Error) Error() string { return fmt.Sprintf("%v: %s", e.Code, e.Message) }

func errorf(code fibp.ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (b *Broker) channelFull(queue string) *Error {
	return &Error{
		Code:     fibp.CodeChannelFull,
		Message:  fmt.Sprintf("queue %q is saturated; back off and retry", queue),
		Metadata: map[string]string{fibp.MetaRetryAfterMs: strconv.Itoa(b.opts.RetryAfterMs)},
	}
}

// fanIn calls done once every part has finished.
type fanIn struct {
	left atomic.Int32
	done func()
}

func newFanIn(parts int, done func()) *fanIn {
	f := &fanIn{done: done}
	f.left.Store(int32(parts))
	if parts == 0 {
		done()
	}
	return f
}

func (f *fanIn) finish() {
	if f.left.Add(-1) == 0 {
		f.done()
	}
}

// Enqueue routes each message of req to its queue and calls done with the results in request
// order once every message is durable (or failed). req may be reused by the caller as soon as
// Enqueue returns: the bodies are copied. A non-nil *Error means the whole frame failed.
func (b *Broker) Enqueue(req *fibp.Enqueue, done func(*fibp.EnqueueResult, *Error)) {
	res := &fibp.EnqueueResult{Results: make([]fibp.EnqueueResultItem, len(req.Messages))}
	// One copy of the messages and one buffer for every payload: req and its frame buffer may
	// be reused as soon as Enqueue returns.
	msgs := slices.Clone(req.Messages)
	bodies := make([]body, len(msgs))
	size := 0
	for i := range msgs {
		size += len(msgs[i].Payload)
	}
	arena := make([]byte, 0, size)
	groups := map[queueRef][]enqueueItem{}
	var order []queueRef
	var last queueRef
	for i := range msgs {
		m := &msgs[i]
		a := last
		if a.a == nil || a.name() != m.Queue {
			a = b.lookup(m.Queue)
		}
		if a.a == nil {
			res.Results[i].ErrorCode = fibp.CodeQueueNotFound
			continue
		}
		last = a
		start := len(arena)
		arena = append(arena, m.Payload...)
		m.Payload = arena[start:len(arena):len(arena)]
		bodies[i] = body{headers: m.Headers, payload: m.Payload}
		items, ok := groups[a]
		if !ok {
			order = append(order, a)
			items = make([]enqueueItem, 0, len(msgs)-i)
		}
		groups[a] = append(items, enqueueItem{index: i, msg: m, body: &bodies[i]})
	}
	var full *Error
	// Every part is counted up front, so the answer is sent by whoever finishes last — normally
	// the queue's sync waiter, before it sends that round's deliveries: a client sees the answer
	// to its request before deliveries that the same round made.
	fin := newFanIn(len(order), func() {
		if full != nil && allCode(res.Results, fibp.CodeChannelFull) {
			done(nil, full)
			return
		}
		done(res, nil)
	})
	for _, r := range order {
		items, l := groups[r], r.lane
		if !r.a.submit(func(a *actor) { a.enqueue(l, items, res.Results, fin.finish) }) {
			full = b.channelFull(r.name())
			for _, it := range items {
				res.Results[it.index].ErrorCode = fibp.CodeChannelFull
			}
			fin.finish()
		}
	}
}

func allCode(rs []fibp.EnqueueResultItem, code fibp.ErrorCode) bool {
	for _, r := range rs {
		if r.ErrorCode != code {
			return false
		}
	}
	return len(rs) > 0
}

// settleKind selects Ack, Nack or ExtendLease.
type settleKind int

const (
	kindAck settleKind = iota
	kindNack
	kindExtend
)

// settle routes per-message items to their queues. codes receives one error code per item.
func (b *Broker) settle(kind settleKind, queues []string, items []settleItem, codes []fibp.ErrorCode, ext []fibp.ExtendLeaseResultItem, done func(*Error)) {
	groups := map[queueRef][]settleItem{}
	var order []queueRef
	for i, q := range queues {
		a := b.lookup(q)
		if a.a == nil {
			if ext != nil {
				ext[i].ErrorCode = fibp.CodeQueueNotFound
			} else {
				codes[i] = fibp.CodeQueueNotFound
			}
			continue
		}
		if _, ok := groups[a]; !ok {
			order = append(order, a)
		}
		groups[a] = append(groups[a], items[i])
	}
	var full *Error
	// Every part is counted up front, so the answer is sent by whoever finishes last — normally
	// the queue's sync waiter, before it sends that round's deliveries: a client sees the answer
	// to its request before deliveries that the same round made.
	fin := newFanIn(len(order), func() { done(full) })
	for _, r := range order {
		its, l := groups[r], r.lane
		var o op
		switch kind {
		case kindAck:
			o = func(a *actor) { a.ack(l, its, codes, fin.finish) }
		case kindNack:
			o = func(a *actor) { a.nack(l, its, codes, fin.finish) }
		default:
			o = func(a *actor) { a.extend(l, its, ext, fin.finish) }
		}
		if !r.a.submit(o) {
			full = b.channelFull(r.name())
			fin.finish()
		}
	}
}

// Ack acknowledges leased messages; done receives one result per item.
func (b *Broker) Ack(req *fibp.Ack, done func(*fibp.AckResult, *Error)) {
	queues := make([]string, len(req.Items))
	items := make([]settleItem, len(req.Items))
	for i, it := range req.Items {
		queues[i], items[i] = it.Queue, settleItem{index: i, id: engine.MsgID(it.MessageID)}
	}
	codes := make([]fibp.ErrorCode, len(items))
	b.settle(kindAck, queues, items, codes, nil, func(e *Error) {
		if e != nil {
			done(nil, e)
			return
		}
		res := &fibp.AckResult{Results: make([]fibp.AckResultItem, len(codes))}
		for i, c := range codes {
			res.Results[i].ErrorCode = c
		}
		done(res, nil)
	})
}

// Nack fails leased messages (retry or dead-letter); done receives one result per item.
func (b *Broker) Nack(req *fibp.Nack, done func(*fibp.NackResult, *Error)) {
	queues := make([]string, len(req.Items))
	items := make([]settleItem, len(req.Items))
	for i, it := range req.Items {
		queues[i] = it.Queue
		items[i] = settleItem{index: i, id: engine.MsgID(it.MessageID), errText: it.Error}
		if v, ok := it.RetryAfterMs.Get(); ok {
			items[i].retryAfter = &v
		}
	}
	codes := make([]fibp.ErrorCode, len(items))
	b.settle(kindNack, queues, items, codes, nil, func(e *Error) {
		if e != nil {
			done(nil, e)
			return
		}
		res := &fibp.NackResult{Results: make([]fibp.NackResultItem, len(codes))}
		for i, c := range codes {
			res.Results[i].ErrorCode = c
		}
		done(res, nil)
	})
}

// ExtendLease moves lease expiries; done receives each new expiry.
func (b *Broker) ExtendLease(req *fibp.ExtendLease, done func(*fibp.ExtendLeaseResult, *Error)) {
	queues := make([]string, len(req.Items))
	items := make([]settleItem, len(req.Items))
	for i, it := range req.Items {
		queues[i] = it.Queue
		items[i] = settleItem{index: i, id: engine.MsgID(it.MessageID), extendBy: it.ExtendByMs}
	}
	res := &fibp.ExtendLeaseResult{Results: make([]fibp.ExtendLeaseResultItem, len(items))}
	b.settle(kindExtend, queues, items, nil, res.Results, func(e *Error) {
		if e != nil {
			done(nil, e)
			return
		}
		done(res, nil)
	})
}

// Subscribe starts a subscription. creditFlow reports whether the connection negotiated
// CREDIT_FLOW_CONTROL; without it, or with credit 0, the server manages the window itself. The
// ConsumeOk frame is sent through sink before any Delivery.
func (b *Broker) Subscribe(req *fibp.Consume, requestID uint32, consumerID string, creditFlow bool, sink Sink) *Error {
	if len(req.Throttles) > 0 {
		return errorf(fibp.CodeInvalidThrottle, "throttle declarations are not supported by this server yet")
	}
	r := b.lookup(req.Queue)
	if r.a == nil {
		return errorf(fibp.CodeQueueNotFound, "queue %q does not exist", req.Queue)
	}
	var failure *Error
	ok := r.a.call(func(a *actor) {
		sub := &subscription{id: consumerID, lane: r.lane, requestID: requestID, sink: sink, auto: !creditFlow || req.Credit == 0}
		credit := req.Credit
		if sub.auto {
			credit = autoCreditWindow
		}
		if err := a.st.Lane(r.lane).Subscribe(consumerID, credit); err != nil {
			failure = errorf(fibp.CodeInternalError, "subscribe: %v", err)
			return
		}
		a.subs[consumerID] = sub
		sink.Send(fibp.AppendFrame(nil, 0, requestID, &fibp.ConsumeOk{ConsumerID: consumerID}), nil)
	})
	if !ok {
		return errorf(fibp.CodeQueueNotFound, "queue %q was deleted", req.Queue)
	}
	return failure
}

// Credit grants more delivery credit to a subscription; unknown ones are ignored.
func (b *Broker) Credit(queue, consumerID string, n uint32) {
	if r := b.lookup(queue); r.a != nil {
		r.a.internal.push(func(a *actor) {
			if sub := a.subs[consumerID]; sub != nil && !sub.auto {
				_ = a.st.Lane(sub.lane).AddCredit(consumerID, n)
			}
		})
	}
}

// Unsubscribe ends a subscription. Its leases stay and expire normally.
func (b *Broker) Unsubscribe(queue, consumerID string) {
	if r := b.lookup(queue); r.a != nil {
		r.a.internal.push(func(a *actor) {
			if sub := a.subs[consumerID]; sub != nil {
				a.dropSubscription(sub)
			}
		})
	}
}
