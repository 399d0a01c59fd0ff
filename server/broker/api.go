package broker

import (
	"fmt"
	"sync/atomic"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/service"
)

// The broker is the local queue service: it serves every queue this node hosts.
var _ service.Service = (*Broker)(nil)

// Error is a failure with its code and a human-readable message. From a hot-path request it
// fails the whole request (the session sends an Error frame); from an admin operation its Code is
// the result's error code.
type Error = service.Error

func errorf(code Code, format string, args ...any) *Error {
	return service.Errorf(code, format, args...)
}

func (b *Broker) channelFull(queue string) *Error {
	return &Error{
		Code:         CodeChannelFull,
		Message:      fmt.Sprintf("queue %q is saturated; back off and retry", queue),
		RetryAfterMs: b.opts.RetryAfterMs,
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

// Enqueue routes each message to its queue and calls done with the results in request order once
// every message is durable (or failed). Enqueue owns msgs from the call on; it copies every
// payload into one buffer of its own, so the memory the payloads point into may be reused by the
// caller as soon as Enqueue returns. Headers and strings are kept. A non-nil *Error means the
// whole request failed (every message was refused ChannelFull: a full inbox, a spent script
// budget, a full deduplication memory), with the back-off to suggest.
func (b *Broker) Enqueue(msgs []Message, done func([]EnqueueResult, *Error)) {
	b.shardMessages(msgs) // sharding.go
	b.enqueue(msgs, done, b.fwd)
}

// enqueue is Enqueue; fwd, when not nil, forwards the messages for queues other nodes lead to
// them (forward.go).
func (b *Broker) enqueue(msgs []Message, done func([]EnqueueResult, *Error), fwd *forwarder) {
	refusing := b.writable()
	if refusing != nil && fwd == nil { // nothing of it goes to another node
		done(nil, refusing)
		return
	}
	if b.clustered() { // NotLeader answers name the leader (routing.go)
		done = b.routeEnqueue(msgs, done, fwd)
	}
	res := make([]EnqueueResult, len(msgs))
	bodies := make([]body, len(msgs))
	var parts forwardParts
	if fwd != nil {
		fwd.classify(msgs, &parts)
	}
	size := 0
	for i := range msgs {
		size += len(msgs[i].Payload)
	}
	arena := make([]byte, 0, size-parts.bytes)
	groups := map[queueRef][]enqueueItem{}
	var order []queueRef
	var last queueRef
	var absent absentMemo
	for i := range msgs {
		if parts.skip != nil && parts.skip[i] {
			continue
		}
		m := &msgs[i]
		a := last
		if a.a == nil || a.name() != m.Queue {
			a = b.lookup(m.Queue)
		}
		if a.a == nil {
			res[i].Code = absent.code(b, m.Queue)
			if fwd != nil && res[i].Code == CodeNotLeader { // routeEnqueue may forward it after Enqueue returned
				start := len(arena)
				arena = append(arena, m.Payload...)
				m.Payload = arena[start:len(arena):len(arena)]
			}
			continue
		}
		if refusing != nil && a.a.writesHere() {
			res[i].Code = CodeStorageError
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
	fin := newFanIn(len(order)+len(parts.nodes), func() {
		if refusing != nil && allCode(res, CodeStorageError) { // none could go to another node
			done(nil, refusing)
			return
		}
		if allCode(res, CodeChannelFull) { // every message was refused for a bound: the whole request is
			if full == nil {
				full = refusalOf(res)
			}
			if full == nil {
				full = b.channelFull(order[0].name())
			}
			done(nil, full)
			return
		}
		done(res, nil)
	})
	for _, n := range parts.nodes {
		fwd.enqueue(n, msgs, parts.items[n], res, fin.finish)
	}
	for _, r := range order {
		items, l := groups[r], r.lane
		answer := func(code Code) {
			for _, it := range items {
				res[it.index].Code = code
			}
			fin.finish()
		}
		switch r.a.submit(request{
			run:    func(a *actor) { a.enqueue(l, items, res, fin.finish) },
			refuse: answer,
		}) {
		case inboxFull:
			full = b.channelFull(r.name())
			answer(CodeChannelFull)
		case actorGone:
			answer(CodeQueueNotFound)
		}
	}
}

// refusalOf returns the first reason a queue gave for a ChannelFull result, or nil.
func refusalOf(rs []EnqueueResult) *Error {
	for _, r := range rs {
		if r.Refusal != nil {
			return r.Refusal
		}
	}
	return nil
}

// allSettled reports whether every settlement item was answered code (ext, for ExtendLease).
func allSettled(codes []Code, ext []ExtendResult, code Code) bool {
	if ext != nil {
		for _, r := range ext {
			if r.Code != code {
				return false
			}
		}
		return len(ext) > 0
	}
	for _, c := range codes {
		if c != code {
			return false
		}
	}
	return len(codes) > 0
}

func allCode(rs []EnqueueResult, code Code) bool {
	for _, r := range rs {
		if r.Code != code {
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

// settle routes per-message items to their queues. codes receives one code per item (ext, for
// ExtendLease, one result per item).
func (b *Broker) settle(kind settleKind, queues []string, items []settleItem, codes []Code, ext []ExtendResult, done func(*Error)) {
	b.settleWith(kind, queues, items, codes, ext, done, b.fwd)
}

// settleWith is settle; fwd, when not nil, forwards the items for queues other nodes lead to
// them (forward.go).
func (b *Broker) settleWith(kind settleKind, queues []string, items []settleItem, codes []Code, ext []ExtendResult, done func(*Error),
	fwd *forwarder) {
	refusing := b.writable()
	if refusing != nil && fwd == nil { // nothing of it goes to another node
		done(refusing)
		return
	}
	if b.clustered() { // NodeNotReady while no leader is known (routing.go)
		done = b.routeSettle(kind, queues, items, codes, ext, done, fwd)
	}
	var parts forwardParts
	if fwd != nil {
		fwd.classifyQueues(queues, &parts)
	}
	groups := map[queueRef][]settleItem{}
	var order []queueRef
	var absent absentMemo
	for i, q := range queues {
		if parts.skip != nil && parts.skip[i] {
			continue
		}
		a := b.lookup(q)
		if a.a == nil || refusing != nil && a.a.writesHere() {
			code := CodeStorageError
			if a.a == nil {
				code = absent.code(b, q)
			}
			if ext != nil {
				ext[i].Code = code
			} else {
				codes[i] = code
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
	if refusing != nil && len(order) == 0 && len(parts.nodes) == 0 && allSettled(codes, ext, CodeStorageError) {
		done(refusing) // none could go to another node
		return
	}
	fin := newFanIn(len(order)+len(parts.nodes), func() { done(full) })
	for _, n := range parts.nodes {
		fwd.settle(kind, n, queues, items, parts.items[n], codes, ext, fin.finish)
	}
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
		refuse := func(code Code) {
			for _, it := range its {
				if ext != nil {
					ext[it.index].Code = code
				} else {
					codes[it.index] = code
				}
			}
			fin.finish()
		}
		switch r.a.submit(request{run: o, refuse: refuse}) {
		case inboxFull:
			full = b.channelFull(r.name())
			fin.finish()
		case actorGone:
			refuse(CodeQueueNotFound)
		}
	}
}

// Ack acknowledges leased messages; done receives one code per item, in order, once they are
// durable. The caller may reuse items as soon as Ack returns.
func (b *Broker) Ack(items []AckItem, done func([]Code, *Error)) {
	queues := make([]string, len(items))
	its := make([]settleItem, len(items))
	for i, it := range items {
		queues[i], its[i] = it.Queue, settleItem{index: i, id: engine.MsgID(it.ID), session: it.Session}
	}
	codes := make([]Code, len(items))
	b.shardSettles(queues, its)
	b.settle(kindAck, queues, its, codes, nil, func(e *Error) {
		if e != nil {
			codes = nil
		}
		done(codes, e)
	})
}

// Nack fails leased messages (retry or dead-letter); done receives one code per item, in order.
// The caller may reuse items as soon as Nack returns.
func (b *Broker) Nack(items []NackItem, done func([]Code, *Error)) {
	queues := make([]string, len(items))
	its := make([]settleItem, len(items))
	for i, it := range items {
		queues[i] = it.Queue
		its[i] = settleItem{index: i, id: engine.MsgID(it.ID), session: it.Session, errText: it.Error}
		if it.HasRetryAfter {
			v := it.RetryAfterMs
			its[i].retryAfter = &v
		}
	}
	codes := make([]Code, len(items))
	b.shardSettles(queues, its)
	b.settle(kindNack, queues, its, codes, nil, func(e *Error) {
		if e != nil {
			codes = nil
		}
		done(codes, e)
	})
}

// ExtendLease moves lease expiries; done receives one result per item, in order. The caller may
// reuse items as soon as ExtendLease returns.
func (b *Broker) ExtendLease(items []ExtendItem, done func([]ExtendResult, *Error)) {
	queues := make([]string, len(items))
	its := make([]settleItem, len(items))
	for i, it := range items {
		queues[i] = it.Queue
		its[i] = settleItem{index: i, id: engine.MsgID(it.ID), session: it.Session, extendBy: it.ExtendByMs}
	}
	res := make([]ExtendResult, len(items))
	b.shardSettles(queues, its)
	b.settle(kindExtend, queues, its, nil, res, func(e *Error) {
		if e != nil {
			res = nil
		}
		done(res, e)
	})
}

// Subscribe starts a subscription: sink.Subscribed is called before it returns and before any
// delivery. The subscription ends with its handle's Unsubscribe (Broker.Unsubscribe), or when a
// Deliver returns false.
func (b *Broker) Subscribe(s SubscribeRequest, sink Sink) (Subscription, *Error) {
	if groups := b.shardGroups(s.Queue); groups != nil {
		return b.subscribeShards(s, sink, groups) // shardsub.go
	}
	if g, ok := b.shardZero(s.Queue); ok { // shardsub.go
		s.Queue = g
	}
	if e := b.subscribe(s, sink); e != nil {
		return nil, e
	}
	return &subscriptionHandle{b: b, queue: s.Queue, consumer: s.ConsumerID}, nil
}

// subscriptionHandle is the handle of a subscription Subscribe started.
type subscriptionHandle struct {
	b               *Broker
	queue, consumer string
}

func (h *subscriptionHandle) Credit(n uint32) { h.b.Credit(h.queue, h.consumer, n) }
func (h *subscriptionHandle) Unsubscribe()    { h.b.Unsubscribe(h.queue, h.consumer) }

func (b *Broker) subscribe(s SubscribeRequest, sink Sink) *Error {
	r := b.lookup(s.Queue)
	if r.a == nil {
		switch b.absentCode(s.Queue) {
		case CodeNotLeader:
			return b.notLeader(s.Queue)
		case CodeNodeNotReady:
			return errorf(CodeNodeNotReady, "this node has not caught up with the cluster's queues yet; retry")
		}
		return errorf(CodeQueueNotFound, "queue %q does not exist", s.Queue)
	}
	if r.a.asleep(func(*summary) {}) {
		// A sleeping group cannot reopen while the store refuses writes (its Raft group must
		// store its term): answer now rather than wait for the disk.
		if e := b.writable(); e != nil {
			return e
		}
	}
	ts, e := b.declareThrottles(s.Queue, s.Holder, s.Throttles)
	if e != nil {
		return e
	}
	var failure *Error
	ok, notReady := r.a.callWaking(func(a *actor) {
		sub := &subscription{id: s.ConsumerID, session: s.Session, since: a.now(), lane: r.lane, sink: sink, auto: s.ManagedCredit || s.Credit == 0, throttles: ts}
		credit := s.Credit
		if sub.auto {
			credit = autoCreditWindow
		}
		if err := a.st.Lane(r.lane).Subscribe(s.ConsumerID, credit); err != nil {
			failure = errorf(CodeInternalError, "subscribe: %v", err)
			return
		}
		a.subs[s.ConsumerID] = sub
		a.addThrottles(sub)
		sink.Subscribed(s.ConsumerID)
	})
	if (!ok || failure != nil) && ts != nil {
		ts.Close()
	}
	if notReady { // the group woke and has no leader yet (wakebound.go)
		return errorf(CodeNodeNotReady, "queue %q is waking and knows no leader yet; retry", s.Queue)
	}
	if !ok {
		if b.clustered() && !r.a.ended() { // a follower: call runs nothing on it (roles.go)
			return b.notLeader(s.Queue)
		}
		return errorf(CodeQueueNotFound, "queue %q was deleted", s.Queue)
	}
	return failure
}

// Credit grants more delivery credit to a subscription; unknown ones are ignored (the handle's
// Credit).
func (b *Broker) Credit(queue, consumerID string, n uint32) {
	if r := b.lookup(queue); r.a != nil {
		r.a.postAwake(func(a *actor) { // a sleeping group has no subscription
			if sub := a.subs[consumerID]; sub != nil && !sub.auto {
				_ = a.st.Lane(sub.lane).AddCredit(consumerID, n)
			}
		})
	}
}

// Unsubscribe ends a subscription (the handle's Unsubscribe). Its leases stay and expire
// normally.
func (b *Broker) Unsubscribe(queue, consumerID string) {
	if r := b.lookup(queue); r.a != nil {
		r.a.postAwake(func(a *actor) { // a sleeping group has no subscription
			if sub := a.subs[consumerID]; sub != nil {
				a.dropSubscription(sub)
			}
		})
	}
}
