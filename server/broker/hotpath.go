package broker

import (
	"bytes"
	"errors"
	"slices"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// enqueueItem is one message of an Enqueue frame routed to this actor. The body is already a
// private copy (the frame buffer is reused by the connection).
type enqueueItem struct {
	index int
	msg   *fibp.EnqueueMessage
	body  *body
}

// enqueue stores messages and reports each one's ID through res.
func (a *actor) enqueue(items []enqueueItem, res []fibp.EnqueueResultItem, done func()) {
	now := a.now()
	msgs := slices.Grow(a.msgBuf[:0], len(items))[:len(items)]
	n := 0
	var dedupUntil int64 // computed once per batch, when a message carries a key
	for _, it := range items {
		m := it.msg
		var hash storage.ID
		key, keyed := m.IdempotencyKey.Get()
		if keyed {
			hash = identityHash(key)
			if orig, dup := a.duplicateOf(hash, now); dup {
				res[it.index] = fibp.EnqueueResultItem{ErrorCode: fibp.CodeOk, MessageID: wire.UUID(orig), Duplicate: true}
				continue
			}
		}
		id := a.b.ids.next(now)
		if keyed {
			if dedupUntil == 0 {
				dedupUntil = addMs(now, a.dedupWindow())
			}
			a.remember(hash, id, dedupUntil)
		}
		fk := m.FairnessKey.Or(engine.DefaultFairnessKey)
		if fk == "" {
			fk = engine.DefaultFairnessKey
		}
		weight := m.Weight.Or(1)
		if weight == 0 {
			weight = 1
		}
		notBefore := now
		if d, ok := m.DelayMs.Get(); ok && d > 0 {
			notBefore = addMs(now, d)
		}
		msgs[n] = engine.Message{ID: id, FairnessKey: fk, Weight: weight, EnqueuedAt: now, NotBefore: notBefore}
		n++
		a.rec = store.MessageRecord{
			Headers:        it.body.headers,
			Payload:        it.body.payload,
			FairnessKey:    fk,
			Weight:         weight,
			EnqueuedAt:     uint64(now),
			NotBefore:      uint64(notBefore),
			IdempotencyKey: m.IdempotencyKey.Value,
		}
		a.batch.PutMessage(a.name, id, &a.rec) // encoded at once: the record can be reused
		a.bodies.put(id, it.body)
		res[it.index] = fibp.EnqueueResultItem{ErrorCode: fibp.CodeOk, MessageID: wire.UUID(id)}
	}
	var err error
	if n > 0 {
		err = a.eng.ApplyEnqueue(engine.Enqueue{At: now, Msgs: msgs[:n]})
	}
	clear(msgs)
	a.msgBuf = msgs[:0]
	if err != nil {
		// IDs are fresh, so this cannot happen; fail loudly rather than lose messages silently.
		a.log.Error("engine refused an enqueue", "err", err)
		for _, it := range items {
			res[it.index] = fibp.EnqueueResultItem{ErrorCode: fibp.CodeInternalError}
		}
	}
	a.m.enqueued.Add(float64(n))
	a.afterCommit(func(err error) {
		if err != nil {
			for _, it := range items {
				res[it.index] = fibp.EnqueueResultItem{ErrorCode: fibp.CodeStorageError}
			}
		}
		done()
	})
}

// settle is the common shape of Ack, Nack and ExtendLease: one item per message of this queue.
type settleItem struct {
	index int
	id    engine.MsgID
	// Nack
	errText    string
	retryAfter *uint64
	// ExtendLease
	extendBy uint64
}

func codeOf(err error) fibp.ErrorCode {
	switch {
	case err == nil:
		return fibp.CodeOk
	case errors.Is(err, engine.ErrMessageNotFound):
		return fibp.CodeMessageNotFound
	default:
		return fibp.CodeInternalError
	}
}

// ack removes leased messages for good.
func (a *actor) ack(items []settleItem, res []fibp.ErrorCode, done func()) {
	now := a.now()
	for _, it := range items {
		err := a.eng.CheckLease(it.id, now)
		if err == nil {
			err = a.eng.ApplyAck(engine.Ack{ID: it.id})
		}
		if res[it.index] = codeOf(err); err == nil {
			a.deleteMessage(it.id)
			a.m.acked.Inc()
		}
	}
	a.afterSettle(func(err error) {
		if err != nil {
			storageFailed(items, res)
		}
		done()
	})
}

func storageFailed(items []settleItem, res []fibp.ErrorCode) {
	for _, it := range items {
		if res[it.index] == fibp.CodeOk {
			res[it.index] = fibp.CodeStorageError
		}
	}
}

// nack fails leased messages: retry or dead-letter, as the retry policy decides.
func (a *actor) nack(items []settleItem, res []fibp.ErrorCode, done func()) {
	now := a.now()
	for _, it := range items {
		err := a.eng.CheckLease(it.id, now)
		var f engine.Fail
		if err == nil {
			f, err = a.eng.DecideFailure(it.id, now, it.errText, it.retryAfter)
		}
		if err == nil {
			err = a.fail(f)
		}
		if res[it.index] = codeOf(err); err == nil {
			a.m.nacked.Inc()
		}
	}
	a.afterSettle(func(err error) {
		if err != nil {
			storageFailed(items, res)
		}
		done()
	})
}

// extend moves lease expiries to now + extend_by (capped).
func (a *actor) extend(items []settleItem, res []fibp.ExtendLeaseResultItem, done func()) {
	now := a.now()
	for _, it := range items {
		err := a.eng.CheckLease(it.id, now)
		var e engine.Extend
		if err == nil {
			e, err = a.eng.DecideExtend(it.id, now, it.extendBy)
		}
		if err == nil {
			err = a.eng.ApplyExtend(e)
		}
		if err == nil {
			a.claim(it.id)
		}
		res[it.index].ErrorCode = codeOf(err)
		if err == nil {
			res[it.index].LeaseExpiresAt = uint64(e.ExpiresAt)
			if a.committed() {
				a.writeState(it.id, store.ReasonNone)
			}
		}
	}
	a.afterSettle(func(err error) {
		if err != nil {
			for _, it := range items {
				if res[it.index].ErrorCode == fibp.CodeOk {
					res[it.index] = fibp.ExtendLeaseResultItem{ErrorCode: fibp.CodeStorageError}
				}
			}
		}
		done()
	})
}

// committed reports whether leases must be durable before deliveries are sent.
func (a *actor) committed() bool {
	return fibp.DeliveryDurability(a.def.DeliveryDurability) == fibp.DeliveryDurabilityCommitted
}

// fail applies a failure decision: a retry updates the message's state; a dead-letter moves the
// message to <queue>.dlq in the same batch and hands it to the DLQ's actor after the commit.
func (a *actor) fail(f engine.Fail) error {
	m, err := a.eng.ApplyFail(f)
	if err != nil {
		return err
	}
	if !f.DeadLetter {
		a.putState(f.ID, stateRecord(&m, store.ReasonNone))
		return nil
	}
	dlq := a.b.actor(a.name + dlqSuffix)
	if dlq == nil { // deleted concurrently: nothing left to keep the message in
		a.deleteMessage(f.ID)
		return nil
	}
	moved := engine.DeadLetterCopy(m)
	if err := a.moveBody(f.ID, dlq.name, &moved, store.ReasonFailed); err != nil {
		return err
	}
	a.m.deadLettered.Inc()
	a.afterSettle(func(err error) {
		if err == nil {
			dlq.internal.push(func(d *actor) { d.adopt(moved) })
			a.b.events.DeadLettered(a.name, moved.ID)
		}
	})
	return nil
}

// moveBody writes message m (ID id, body from this queue) into queue dst with the given state,
// and deletes it here, in the round's batch.
func (a *actor) moveBody(id engine.MsgID, dst string, m *engine.Message, reason store.DeadLetterReason) error {
	b, err := a.loadBody(id)
	if err != nil {
		return err
	}
	a.batch.PutMessage(dst, storage.ID(id), &store.MessageRecord{
		Headers: b.headers, Payload: b.payload, FairnessKey: m.FairnessKey, Weight: m.Weight,
		EnqueuedAt: uint64(m.EnqueuedAt), NotBefore: uint64(max(m.NotBefore, 0)),
	})
	a.batch.PutState(dst, storage.ID(id), stateRecord(m, reason))
	a.deleteMessage(id)
	return nil
}

// adopt takes a message that another actor already wrote into this queue's storage, with a
// state record (moveBody writes one).
func (a *actor) adopt(m engine.Message) {
	a.p.hasState[m.ID] = struct{}{}
	now := a.now()
	if err := a.eng.ApplyEnqueue(engine.Enqueue{At: now, Msgs: []engine.Message{m}}); err != nil {
		a.log.Error("adopting a moved message failed", "id", m.ID, "err", err)
	}
}

// expire turns leases that ran out into failures ("lease expired").
func (a *actor) expire(now int64) {
	a.idBuf = a.eng.Expired(now, a.idBuf[:0])
	for _, id := range a.idBuf {
		var f engine.Fail
		var err error
		if a.unclaimed(id) {
			// The reclaim grace ended and nobody claimed the message: it becomes deliverable
			// again as it was, without a failed attempt (it may never have been delivered).
			f = engine.Fail{ID: id, At: now, NotBefore: now, Uncounted: true}
		} else {
			f, err = a.eng.DecideFailure(id, now, "lease expired", nil)
		}
		delete(a.claimed, id)
		if err == nil {
			err = a.fail(f)
		}
		if err != nil {
			a.log.Error("expiring a lease failed", "id", id, "err", err)
			continue
		}
		a.m.expired.Inc()
	}
}

// dispatch leases ready messages to subscriptions with credit and encodes their Delivery frames,
// to be sent after the commit.
func (a *actor) dispatch(now int64) {
	if len(a.subs) == 0 {
		return
	}
	for {
		a.leaseBuf = a.eng.Dispatch(now, maxDispatchPerRound, a.leaseBuf[:0])
		if len(a.leaseBuf) == 0 {
			break
		}
		a.prefetchBodies(a.leaseBuf)
		for _, l := range a.leaseBuf {
			a.deliver(l)
		}
		clear(a.fetched)
		if len(a.leaseBuf) < maxDispatchPerRound {
			break
		}
	}
	a.flushLeases()
	for sub, buf := range a.pending {
		a.encodeDeliveries(sub, buf)
	}
}

// prefetchBodies reads, in key order with one storage iterator, the bodies of leased messages
// that are no longer cached — draining a backlog then costs sequential reads, not one point
// lookup per message.
func (a *actor) prefetchBodies(leases []engine.Lease) {
	ids := a.fetchIDs[:0]
	for _, l := range leases {
		if _, ok := a.bodies.get(l.ID); !ok {
			ids = append(ids, storage.ID(l.ID))
		}
	}
	a.fetchIDs = ids
	if len(ids) < 2 {
		return // one lookup is as cheap as an iterator
	}
	slices.SortFunc(ids, func(x, y storage.ID) int { return bytes.Compare(x[:], y[:]) })
	if a.fetched == nil {
		a.fetched = map[engine.MsgID]body{}
	}
	err := a.b.db.ReadMessages(a.name, ids, func(i int, r *store.MessageRecord) {
		a.fetched[engine.MsgID(ids[i])] = body{headers: r.Headers, payload: bytes.Clone(r.Payload)}
	})
	if err != nil {
		a.log.Error("reading message bodies failed", "err", err)
	}
}

// deliver adds one leased message to its subscription's Delivery frame.
func (a *actor) deliver(l engine.Lease) {
	sub := a.subs[l.Consumer]
	m, ok := a.eng.Get(l.ID)
	if sub == nil || !ok {
		return
	}
	b, ok := a.fetched[l.ID]
	if !ok {
		var err error
		if b, err = a.loadBody(l.ID); err != nil {
			a.log.Error("reading a message body failed", "id", l.ID, "err", err)
			return
		}
	}
	if a.committed() {
		a.recordLease(l, m.Attempts)
	}
	buf := a.pending[sub]
	if buf == nil {
		buf = &deliveryBuf{}
		a.pending[sub] = buf
	}
	buf.msgs = append(buf.msgs, fibp.DeliveryMessage{
		MessageID:      wire.UUID(l.ID),
		Queue:          a.name,
		Headers:        b.headers,
		Payload:        b.payload,
		FairnessKey:    m.FairnessKey,
		Weight:         m.Weight,
		AttemptCount:   m.Attempts,
		RedriveCount:   m.RedriveCount,
		EnqueuedAt:     uint64(m.EnqueuedAt),
		LeasedAt:       uint64(l.LeasedAt),
		LeaseExpiresAt: uint64(l.ExpiresAt),
	})
	buf.size += len(b.payload) + 128
	if buf.size >= deliveryFrameBytes {
		a.encodeDeliveries(sub, buf)
	}
	a.m.delivered.Inc()
}

// encodeDeliveries encodes a subscription's pending deliveries into one Delivery frame (split into
// continuation frames if it exceeds the maximum frame size).
func (a *actor) encodeDeliveries(sub *subscription, buf *deliveryBuf) {
	if len(buf.msgs) == 0 {
		return
	}
	d := fibp.Delivery{Messages: buf.msgs}
	var frame []byte
	if size := fibp.HeaderSize + d.Size(); size <= fibp.MaxFrameSize {
		frame = fibp.AppendFrame(make([]byte, 0, fibp.LengthSize+size), 0, sub.requestID, &d)
	} else {
		frame = fibp.AppendContinued(nil, fibp.OpDelivery, sub.requestID, d.AppendTo(nil), fibp.MaxFrameSize)
	}
	a.outbox = append(a.outbox, outFrame{sub: sub, frame: frame, count: len(buf.msgs)})
	clear(buf.msgs)
	buf.msgs, buf.size = buf.msgs[:0], 0
}

func addMs(t int64, ms uint64) int64 {
	if ms > uint64(1<<62) {
		return 1 << 62
	}
	return t + int64(ms)
}
