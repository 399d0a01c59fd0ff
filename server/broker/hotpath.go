package broker

import (
	"errors"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/service"
)

// enqueueItem is one message of an Enqueue routed to this actor. The body is already a private
// copy (the caller's payload memory may be reused).
type enqueueItem struct {
	index int
	msg   *Message
	body  *body
}

// dedupWindow is the queue's deduplication window in milliseconds (a window stored before
// windows had a maximum is cut to it).
func (a *actor) dedupWindow(l queuegroup.Lane, d *Defaults) uint64 {
	if w := a.lanes[l].def.DedupWindowMs; w > 0 {
		return min(w, MaxDedupWindowMs)
	}
	return d.DedupWindowMs
}

// enqueue stores messages in lane l and reports each one's ID through res. A message whose
// deduplication identity the group remembers is answered with the original's ID and not stored
// (deduplication.md), and one with a new identity is refused ChannelFull when the dedup memory is
// full (dedupbudget.go); one missing the ordering key of a queue that rejects those is answered
// OrderingKeyMissing (ordering.md). The ordering group is decided here and carried in the log.
func (a *actor) enqueue(l queuegroup.Lane, items []enqueueItem, res []EnqueueResult, done func()) {
	now := a.now()
	lk := &a.lanes[l].keys
	c := queuelog.Enqueue{Lane: l, At: now, Messages: make([]queuelog.LogMessage, 0, len(items))}
	var dd batchDedup
	var refusal *Error // why a full queue refuses, made once
	lim := a.laneLimits(l)
	classes := a.classifyAll(l, items)
	refuseLongDelays(items, classes, &lim)
	for i, it := range items {
		cls, m := &classes[i], it.msg
		if cls.code != CodeOk {
			res[it.index] = EnqueueResult{Code: cls.code}
			continue
		}
		attrs := cls.attrs
		fk := cls.fairnessKey
		if fk == "" {
			fk = engine.DefaultFairnessKey
		}
		subj := keys.Subject{Headers: it.body.headers, FairnessKey: fk, Attributes: attrs, IdempotencyKey: m.IdempotencyKey,
			HasIdempotencyKey: m.HasKey, Payload: it.body.payload}
		group, grouped, ok := lk.group(&subj)
		if cls.parked { // grouped when it is classified
			group, grouped, ok = "", false, true
			a.parked(now)
		}
		if !ok {
			res[it.index] = EnqueueResult{Code: CodeOrderingKeyMissing}
			continue
		}
		hash, keyed := lk.identity(&subj)
		if keyed {
			if r, answered := a.admitIdentity(l, &dd, hash, now); answered {
				res[it.index] = r
				continue
			}
		}
		if r, full := a.refuseWhenFull(l, &lim, len(c.Messages), &refusal); full {
			res[it.index] = r
			continue
		}
		id := a.b.ids.next(now)
		if d := &a.lanes[l].def; d.Shards > 1 || d.ShardOf != "" { // a sharded queue's IDs name their shard (sharding.go)
			shard.SetIndex(&id, d.ShardIndex)
		}
		var ident []byte
		if keyed {
			ident = dd.keep(hash, id, len(items))
		}
		weight := cls.weight
		if weight == 0 {
			weight = 1
		}
		notBefore := now
		if cls.delayMs > 0 { // a script's delay is cut to the limit; a producer's was refused above
			notBefore = addMs(now, min(cls.delayMs, lim.MaxDelayMs))
		}
		c.Messages = append(c.Messages, queuelog.LogMessage{ID: wire.UUID(id), FairnessKey: fk, Weight: weight, NotBefore: notBefore,
			Headers: it.body.headers, Payload: it.body.payload, Identity: ident, DedupUntil: dd.until,
			Grouped: grouped, Group: []byte(group), Attributes: attrs, Unclassified: cls.parked})
		a.bodies.put(id, it.body)
		res[it.index] = EnqueueResult{Code: CodeOk, ID: id}
	}
	var err error
	if len(c.Messages) > 0 {
		err = a.st.Enqueue(&c)
		a.dropOldest(l, &lim, now)
	}
	if err != nil {
		// IDs are fresh, so this cannot happen; fail loudly rather than lose messages silently.
		a.log.Error("the engine refused an enqueue", "err", err)
		for _, it := range items {
			res[it.index] = EnqueueResult{Code: CodeInternalError}
		}
	}
	a.lanes[l].m.enqueued.Add(float64(len(c.Messages)))
	a.afterCommit(func(err error) {
		if err != nil {
			for _, it := range items {
				res[it.index] = EnqueueResult{Code: a.b.failureCode(err)}
			}
		}
		done()
	})
}

// batchDedup finds the duplicates in one Enqueue batch: of a message the group remembers, or of
// one earlier in the batch.
type batchDedup struct {
	ids    map[queuegroup.Identity]engine.MsgID // the batch's identities so far
	idents []byte                               // their bytes, one allocation for the batch
	until  int64                                // how long they are remembered; set at the first identity
	// defaults are the runtime config's, read at the first identity (window and bounds).
	defaults *Defaults
}

// admitIdentity decides about a message with identity hash: answered with a duplicate's result
// when the group or the batch remembers it, or with ChannelFull when the dedup memory has no room
// for a new one (dedupbudget.go); else it may be stored.
func (a *actor) admitIdentity(l queuegroup.Lane, dd *batchDedup, hash queuegroup.Identity, now int64) (EnqueueResult, bool) {
	if orig, dup := dd.duplicate(a.st, hash, now); dup {
		return EnqueueResult{Code: CodeOk, ID: MessageID(orig), Duplicate: true}, true
	}
	if dd.defaults == nil {
		d := a.b.currentDefaults()
		dd.defaults, dd.until = &d, addMs(now, a.dedupWindow(l, &d))
	}
	if !a.reserveIdentity(dd.defaults, len(dd.ids)) {
		return EnqueueResult{Code: CodeChannelFull}, true
	}
	return EnqueueResult{}, false
}

// duplicate returns the message first accepted with identity hash, if there is one.
func (d *batchDedup) duplicate(st *queuegroup.State, hash queuegroup.Identity, now int64) (engine.MsgID, bool) {
	if orig, dup := st.Duplicate(hash, now); dup {
		return orig, true
	}
	orig, dup := d.ids[hash]
	return orig, dup
}

// keep records that message id of a batch of n has identity hash, and returns the identity's
// bytes for its log entry.
func (d *batchDedup) keep(hash queuegroup.Identity, id engine.MsgID, n int) []byte {
	if d.ids == nil {
		d.ids = map[queuegroup.Identity]engine.MsgID{}
		d.idents = make([]byte, 0, len(hash)*n)
	}
	d.ids[hash] = id
	d.idents = append(d.idents, hash[:]...)
	return d.idents[len(d.idents)-len(hash):]
}

// settleItem is the common shape of Ack, Nack and ExtendLease: one item per message of a lane.
type settleItem struct {
	index   int
	id      engine.MsgID
	session string
	// Nack
	errText    string
	retryAfter *uint64
	// ExtendLease
	extendBy uint64
}

func codeOf(err error) Code {
	switch {
	case err == nil:
		return CodeOk
	case errors.Is(err, engine.ErrMessageNotFound):
		return CodeMessageNotFound
	default:
		return CodeInternalError
	}
}

// ack removes leased messages for good.
func (a *actor) ack(l queuegroup.Lane, items []settleItem, res []Code, done func()) {
	now := a.now()
	q := a.st.Lane(l)
	for _, it := range items {
		err := a.checkLease(q, it, now)
		leasedAt, leased := q.LeasedAt(it.id)
		if err == nil {
			err = a.st.Ack(l, it.id, now)
		}
		if res[it.index] = codeOf(err); err == nil {
			a.bodies.remove(it.id)
			a.lanes[l].m.acked.Inc()
			if leased {
				a.lanes[l].m.processSeconds.Observe(msSeconds(leasedAt, now))
			}
		}
	}
	a.afterCommit(func(err error) {
		if err != nil {
			failed(items, res, a.b.failureCode(err))
		}
		done()
	})
}

// checkLease is CheckLease for a settlement of it, with checkHolder.
func (a *actor) checkLease(q *engine.Queue, it settleItem, now int64) error {
	if err := a.checkHolder(q, it); err != nil {
		return err
	}
	return q.CheckLease(it.id, now)
}

// checkHolder refuses a settlement of a message leased to a live subscription of another
// session (Subscription.Session): the sender's own lease ended when the message was redelivered.
// A lease older than the subscription of its consumer ID is not that subscription's: consumer IDs
// of connections before a restart come back on new connections, and recovered leases settle from
// anywhere.
func (a *actor) checkHolder(q *engine.Queue, it settleItem) error {
	if it.session == "" {
		return nil
	}
	holder, leasedAt, leased := q.LeaseHolder(it.id)
	if !leased {
		return nil
	}
	sub := a.subs[holder]
	if sub == nil || sub.session == "" || sub.session == it.session || leasedAt < sub.since {
		return nil
	}
	return engine.ErrMessageNotFound
}

// sessionSub returns the ID of a subscription of session on lane l, "" when it has none.
func (a *actor) sessionSub(l queuegroup.Lane, session string) string {
	if session == "" {
		return ""
	}
	for id, sub := range a.subs {
		if sub.session == session && sub.lane == l {
			return id
		}
	}
	return ""
}

// failed answers code for the items of a failed round that had succeeded in it.
func failed(items []settleItem, res []Code, code Code) {
	for _, it := range items {
		if res[it.index] == CodeOk {
			res[it.index] = code
		}
	}
}

// nack fails leased messages: retry or dead-letter, as the retry policy decides.
func (a *actor) nack(l queuegroup.Lane, items []settleItem, res []Code, done func()) {
	now := a.now()
	q := a.st.Lane(l)
	for _, it := range items {
		err := a.checkLease(q, it, now)
		var f engine.Fail
		if err == nil {
			f, err = q.DecideFailure(it.id, now, it.errText, it.retryAfter)
		}
		if err == nil {
			err = a.fail(l, f)
		}
		if res[it.index] = codeOf(err); err == nil {
			a.lanes[l].m.nacked.Inc()
		}
	}
	a.afterCommit(func(err error) {
		if err != nil {
			failed(items, res, a.b.failureCode(err))
		}
		done()
	})
}

// extend moves lease expiries to now + extend_by (capped).
func (a *actor) extend(l queuegroup.Lane, items []settleItem, res []ExtendResult, done func()) {
	now := a.now()
	q := a.st.Lane(l)
	for _, it := range items {
		err := a.checkHolder(q, it)
		var e engine.Extend
		if err == nil {
			e, err = q.DecideExtend(it.id, now, it.extendBy)
		}
		if _, _, leased := q.LeaseHolder(it.id); err == nil && !leased {
			e.Consumer = a.sessionSub(l, it.session) // a held message: the lease is re-established for the asker
		}
		if err == nil {
			err = a.st.Extend(l, e, a.committed(l))
		}
		res[it.index].Code = codeOf(err)
		if err == nil {
			res[it.index].ExpiresAt = e.ExpiresAt
		}
	}
	a.afterCommit(func(err error) {
		if err != nil {
			for _, it := range items {
				if res[it.index].Code == CodeOk {
					res[it.index] = ExtendResult{Code: a.b.failureCode(err)}
				}
			}
		}
		done()
	})
}

// committed reports whether lane l logs its leases before deliveries are sent: by its
// definition, and always while a takeover has not confirmed the definition current (reclaim.go).
func (a *actor) committed(l queuegroup.Lane) bool {
	return a.unconfirmed || a.lanes[l].def.DeliveryDurability == store.DeliveryDurabilityCommitted
}

// fail applies a failure decision; a message dead-lettered out of the queue moves to the
// dead-letter lane in the same command.
func (a *actor) fail(l queuegroup.Lane, f engine.Fail) error {
	moved, dead, err := a.st.Fail(l, f)
	if err != nil || !dead {
		return err
	}
	a.lanes[l].m.deadLettered.Inc()
	a.afterCommit(func(err error) {
		if err == nil {
			a.b.events.DeadLettered(a.lanes[l].name, moved.ID)
		}
	})
	return nil
}

// expire turns leases of lane l that ran out into failures ("lease expired"), after
// dead-lettering the messages of the queue lane past their retention.
func (a *actor) expire(l queuegroup.Lane, now int64) {
	if l == queuegroup.LaneQueue {
		a.retain(now) // and messages past the queue's retention (queuelimits.go)
	}
	q := a.st.Lane(l)
	a.idBuf = q.Expired(now, a.idBuf[:0])
	for _, id := range a.idBuf {
		f, err := q.DecideFailure(id, now, "lease expired", nil)
		if err == nil {
			err = a.fail(l, f)
		}
		if err != nil {
			a.log.Error("expiring a lease failed", "id", id, "err", err)
			continue
		}
		a.lanes[l].m.expired.Inc()
	}
}

// dispatch leases ready messages of lane l to subscriptions with credit and batches their
// deliveries, to be handed to the sinks after the commit.
func (a *actor) dispatch(l queuegroup.Lane, now int64) {
	if len(a.subs) == 0 {
		return
	}
	for {
		a.leaseBuf = a.st.Dispatch(l, now, maxDispatchPerRound, a.leaseBuf[:0])
		if len(a.leaseBuf) == 0 {
			break
		}
		for _, le := range a.leaseBuf {
			a.deliver(l, le)
		}
		clear(a.fetched)
		if len(a.leaseBuf) < maxDispatchPerRound {
			break
		}
	}
	clear(a.fetched) // bodies a throttle's Class read for messages it parked
	for sub, buf := range a.pending {
		a.closeBatch(sub, buf)
	}
}

// bodyAtHand finds the body of leased message id if it is at hand: in the body cache, or read
// already by a throttle's Class. The others are read from storage beside the round's commit
// (bodyread.go).
func (a *actor) bodyAtHand(id engine.MsgID) (body, bool) {
	if cached, ok := a.bodies.get(id); ok {
		return *cached, true
	}
	b, ok := a.fetched[id]
	return b, ok
}

// deliver adds one leased message to its subscription's batch with its body if at hand, else
// marks the delivery to have its body read from storage before it is handed over.
func (a *actor) deliver(l queuegroup.Lane, le engine.Lease) {
	sub := a.subs[le.Consumer]
	m, ok := a.st.Lane(l).Get(le.ID)
	if sub == nil || !ok {
		return
	}
	b, atHand := a.bodyAtHand(le.ID)
	dead := a.deadLetterNoteOf(l, le.ID)
	if atHand {
		b.headers = dead.headers(b.headers)
	} else {
		a.unread++
	}
	buf := a.pending[sub]
	if buf == nil {
		buf = &deliveryBuf{}
		a.pending[sub] = buf
	}
	if buf.msgs == nil {
		buf.msgs = a.batches.get()
	}
	buf.msgs = append(buf.msgs, Delivery{Delivery: service.Delivery{
		ID:           MessageID(le.ID),
		Queue:        a.lanes[l].public,
		Headers:      b.headers,
		Payload:      b.payload,
		FairnessKey:  m.FairnessKey,
		Weight:       m.Weight,
		Attempt:      m.Attempts,
		RedriveCount: m.RedriveCount,
		EnqueuedAt:   m.EnqueuedAt,
		LeasedAt:     le.LeasedAt,
		ExpiresAt:    le.ExpiresAt,
	}, unread: !atHand, dead: dead})
	buf.size += len(b.payload) + 128 // a body still to be read counts only its overhead
	if buf.size >= deliveryBatchBytes {
		a.closeBatch(sub, buf)
	}
	a.lanes[l].m.delivered.Inc()
	if m.Attempts == 1 && m.RedriveCount == 0 { // the first lease: Attempts counts this one
		a.lanes[l].m.waitSeconds.Observe(msSeconds(m.EnqueuedAt, le.LeasedAt))
	}
}

// closeBatch moves a subscription's pending deliveries to the round's outbox, to be handed to
// its sink once the round is durable (the session splits a batch too big for one frame).
func (a *actor) closeBatch(sub *subscription, buf *deliveryBuf) {
	if len(buf.msgs) == 0 {
		return
	}
	a.outbox = append(a.outbox, outBatch{sub: sub, deliveries: buf.msgs})
	buf.msgs, buf.size = nil, 0
}

func addMs(t int64, ms uint64) int64 {
	if ms > uint64(1<<62) {
		return 1 << 62
	}
	return t + int64(ms)
}
