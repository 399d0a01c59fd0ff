package engine

import (
	"errors"
	"runtime"
)

// Errors returned by Queue methods. They name the package, and callers compare with errors.Is.
var (
	// ErrMessageNotFound: the ID is not stored, or (Extend, CheckLease and the Decide*
	// methods) it is stored but neither leased nor held (see Queue.Hold), or (CheckLease) its
	// lease or hold has ended. This is the MessageNotFound of the protocol.
	ErrMessageNotFound = errors.New("engine: message not found")
	// ErrDuplicateID: an Enqueue carries an ID that is already stored (or twice).
	ErrDuplicateID = errors.New("engine: duplicate message ID")
	// ErrNotReady: a Lease names a message that is not ready (delayed, held or already leased).
	ErrNotReady = errors.New("engine: message not ready")
	// ErrQueueFull: the queue holds the maximum number of messages or fairness keys.
	ErrQueueFull = errors.New("engine: queue full")
	// ErrSubscriptionExists: Subscribe with a consumer ID that is already subscribed.
	ErrSubscriptionExists = errors.New("engine: subscription exists")
	// ErrSubscriptionNotFound: AddCredit or Unsubscribe with an unknown consumer ID.
	ErrSubscriptionNotFound = errors.New("engine: subscription not found")
)

// keyState is one fairness key: its DRR state, the FIFO of its ready messages and the list of
// its held messages (in enqueue order), both linked through rec.next/prev.
type keyState struct {
	name               string
	deficit            uint64 // remaining DRR deficit of the current turn
	weight             uint32 // weight of the most recently enqueued message
	pending            uint32 // ready messages
	refs               uint32 // stored messages in any state
	head, tail         uint32 // ready FIFO
	held               uint32 // held messages
	heldHead, heldTail uint32 // held list
}

// leaseRec is the lease of one in-flight message. Free records are linked through slot.
type leaseRec struct {
	leasedAt  int64
	expiresAt int64
	consumer  string
	slot      uint32
	pos       uint32 // position in the lease heap
}

// Queue is the state machine of one queue: its stored messages, the DRR scheduler over their
// fairness keys, leases, and the subscriptions of its live consumers. A Queue is not safe for
// concurrent use; the broker drives each Queue from one goroutine (or under one lock).
//
// State changes come in two kinds. Commands (Apply and the Apply* methods) are deterministic
// and replayable. Subscriptions and credit (Subscribe, AddCredit, Unsubscribe) belong to the
// live connections of the node that runs Dispatch, and Hold to its takeover of a fast queue;
// they are not replicated, and a replay or restore starts without them.
type Queue struct {
	name   string
	cfg    Config
	policy FailurePolicy
	// park is the Admission of Dispatch (throttles) and the messages it keeps parked (park.go).
	park parking

	slab         *slab
	index        *msgIndex
	ohead, otail uint32 // every stored message, in enqueue order

	keys     []keyState
	keyIdx   map[string]uint32
	freeKeys []uint32
	active   ring // keys with ready messages; the head has the DRR turn

	delayed   timeHeap // delayed messages by NotBefore; ref = slot
	leases    []leaseRec
	freeLease uint32
	leaseHeap timeHeap // leases by expiry; ref = slot (rec.next is the lease index)

	errs map[uint32]string // LastError by slot, for messages that have one

	holdUntil int64 // end of the hold (Unix ms); meaningful while nHeld > 0

	groups groupTable        // ordering groups (ordering.go)
	uncl   unclassifiedTable // unclassified messages (unclassified.go)

	subs     []subState
	subIdx   map[string]uint32
	freeSubs []uint32
	credited ring // subscriptions with credit; the head receives the next delivery

	ready, nDelayed, inFlight, nHeld int

	rates deliveryRates // deliveries over the last minute (rates.go)

	scratch []heapEnt
	ids     []MsgID
}

// NewQueue returns an empty queue named name (the name is only reported in Message.Queue).
// cfg must pass Validate; use DefaultConfig or Config.WithDefaults to fill in server defaults.
func NewQueue(name string, cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &Queue{
		name:      name,
		cfg:       cfg,
		slab:      newSlab(cfg.Alloc),
		index:     newMsgIndex(ordChunkCap, cfg.Alloc),
		ohead:     nilIdx,
		otail:     nilIdx,
		keyIdx:    make(map[string]uint32),
		active:    newRing(),
		freeLease: nilIdx,
		errs:      make(map[uint32]string),
		subIdx:    make(map[string]uint32),
		credited:  newRing(),
	}
	q.delayed.slab, q.leaseHeap.slab = q.slab, q.slab
	// The Allocator's memory of a Queue dropped without Release goes back when it is collected.
	runtime.AddCleanup(q, (*slab).unmap, q.slab)
	runtime.AddCleanup(q, (*msgIndex).unmap, q.index)
	q.delayed.setPos = func(slot, pos uint32) { q.slab.at(slot).next = pos }
	q.leaseHeap.setPos = func(slot, pos uint32) { q.leases[q.slab.at(slot).next].pos = pos }
	return q, nil
}

// Release gives back the memory the Queue holds from its Allocator (Config.Alloc) now, rather
// than when the Queue is collected. The broker calls it when it drops the Queue (the queue
// deleted, hibernated, reloaded or closed). Nothing may use the Queue afterwards but Release
// itself: a use panics, it never reaches memory given back.
func (q *Queue) Release() {
	q.slab.unmap()
	q.index.unmap()
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Config returns the queue's current configuration.
func (q *Queue) Config() Config { return q.cfg }

// Len returns the number of stored messages (ready, held, delayed and leased).
func (q *Queue) Len() int { return int(q.slab.live) }

// internKey returns the index of the fairness key name, creating it if needed (checkNew has
// made sure there is room).
func (q *Queue) internKey(name string) uint32 {
	if k, ok := q.keyIdx[name]; ok {
		return k
	}
	var k uint32
	if n := len(q.freeKeys); n > 0 {
		k = q.freeKeys[n-1]
		q.freeKeys = q.freeKeys[:n-1]
	} else {
		k = uint32(len(q.keys))
		q.keys = append(q.keys, keyState{})
	}
	q.keys[k] = keyState{name: name, head: nilIdx, tail: nilIdx, heldHead: nilIdx, heldTail: nilIdx}
	q.keyIdx[name] = k
	return k
}

// unrefKey drops one stored message from key k, forgetting the key when it has none left.
func (q *Queue) unrefKey(k uint32) {
	ks := &q.keys[k]
	ks.refs--
	if ks.refs > 0 {
		return
	}
	delete(q.keyIdx, ks.name)
	*ks = keyState{}
	q.rates.forget(k)
	if len(q.keyIdx) == 0 {
		q.keys, q.freeKeys = q.keys[:0], q.freeKeys[:0]
		return
	}
	q.freeKeys = append(q.freeKeys, k)
}

// makeReady appends a stored, not ready message to its key's FIFO; a key that gains its first
// ready message joins the end of the DRR round.
func (q *Queue) makeReady(slot uint32, r *rec) {
	k := r.key()
	if q.appendReady(slot, r).pending == 1 {
		q.active.pushBack(k)
	}
}

// appendReady links a message at the end of its key's FIFO, leaving the DRR round to the caller.
func (q *Queue) appendReady(slot uint32, r *rec) *keyState {
	r.setState(stReady)
	ks := &q.keys[r.key()]
	r.next, r.prev = nilIdx, ks.tail
	if ks.tail == nilIdx {
		ks.head = slot
	} else {
		q.slab.at(ks.tail).next = slot
	}
	ks.tail = slot
	ks.pending++
	q.ready++
	return ks
}

// unlinkReady takes a ready message out of its key's FIFO. The key's DRR state is the
// caller's business (see leaveIfIdle).
func (q *Queue) unlinkReady(r *rec) *keyState {
	ks := &q.keys[r.key()]
	if r.prev == nilIdx {
		ks.head = r.next
	} else {
		q.slab.at(r.prev).next = r.next
	}
	if r.next == nilIdx {
		ks.tail = r.prev
	} else {
		q.slab.at(r.next).prev = r.prev
	}
	ks.pending--
	q.ready--
	return ks
}

// leaveIfIdle takes key k out of the DRR round, resetting its deficit, once it has no ready
// message.
func (q *Queue) leaveIfIdle(k uint32, ks *keyState) {
	if ks.pending == 0 {
		q.active.remove(k)
		ks.deficit = 0
	}
}

// advance makes ready every delayed message whose NotBefore is at or before now, in
// (NotBefore, ID) order, and ends a hold whose time has come (after the messages due before it,
// before those due at it).
func (q *Queue) advance(now int64) {
	if q.nHeld > 0 && q.holdUntil <= now {
		q.promote(q.holdUntil - 1)
		q.release()
	}
	q.promote(now)
}

// promote makes ready the delayed messages due at or before now.
func (q *Queue) promote(now int64) {
	for {
		t, ok := q.delayed.top()
		if !ok || t.at > now {
			return
		}
		q.delayed.remove(0)
		q.nDelayed--
		q.makeReady(t.ref, q.slab.at(t.ref))
	}
}

// Advance promotes the delayed messages whose NotBefore is at or before now, and releases held
// messages if the hold ends at or before now. It is not a command: every timed command implies
// it (see Command), and Dispatch calls it; call it directly before Stats to see up-to-date
// delayed, held and pending counts.
func (q *Queue) Advance(now int64) { q.advance(now) }

// insert stores m (checked by checkNew) as enqueued at time at.
func (q *Queue) insert(m *Message, at int64) {
	slot, r := q.store(m)
	if r.enqueuedAt == 0 {
		r.enqueuedAt = at
	}
	if q.parksUnclassified(m) {
		q.parkUnclassified(r)
		return
	}
	q.place(slot, r, at)
}

// store adds m at the end of the enqueue order, in no state yet (free), and returns its slot.
func (q *Queue) store(m *Message) (uint32, *rec) {
	name := m.FairnessKey
	if name == "" {
		name = DefaultFairnessKey
	}
	k := q.internKey(name)
	w := max(m.Weight, 1)
	q.keys[k].weight = w
	q.keys[k].refs++
	slot := q.slab.alloc()
	r := q.slab.at(slot)
	*r = rec{
		id: m.ID, enqueuedAt: m.EnqueuedAt, notBefore: m.NotBefore,
		weight: w, attempts: m.Attempts, redrives: m.RedriveCount, meta: k,
		onext: nilIdx, oprev: q.otail,
	}
	if m.Headers != nil || m.Payload != nil || m.Attributes != nil {
		q.slab.setBody(slot, body{m.Headers, m.Payload, m.Attributes})
	}
	if m.LastError != "" {
		q.setError(slot, r, m.LastError)
	}
	if q.otail == nilIdx {
		q.ohead = slot
	} else {
		q.slab.at(q.otail).onext = slot
	}
	q.otail = slot
	q.index.insert(m.ID, slot)
	if m.Unclassified {
		q.markUnclassified(slot, m.ClassifyTries)
	}
	if m.Grouped && !q.parksUnclassified(m) {
		q.joinGroup(slot, r, m.Group)
	}
	return slot, r
}

// schedule makes a message that is neither ready nor leased wait for its NotBefore, or ready
// when that is at or before now.
func (q *Queue) schedule(slot uint32, r *rec, now int64) {
	if r.notBefore > now {
		r.setState(stDelayed)
		q.nDelayed++
		q.delayed.push(r.notBefore, slot)
		return
	}
	q.makeReady(slot, r)
}

func (q *Queue) setError(slot uint32, r *rec, text string) {
	if text == "" {
		if r.meta&metaHasError != 0 {
			delete(q.errs, slot)
			r.meta &^= metaHasError
		}
		return
	}
	q.errs[slot] = text
	r.meta |= metaHasError
}

// delete forgets a stored message that is neither ready, delayed nor leased any more, and has
// left its ordering group (see drop).
func (q *Queue) delete(slot uint32, r *rec) {
	q.index.remove(r.id, slot)
	if r.oprev == nilIdx {
		q.ohead = r.onext
	} else {
		q.slab.at(r.oprev).onext = r.onext
	}
	if r.onext == nilIdx {
		q.otail = r.oprev
	} else {
		q.slab.at(r.onext).oprev = r.oprev
	}
	if r.meta&metaHasError != 0 {
		delete(q.errs, slot)
	}
	q.forgetUnclassified(slot)
	q.unrefKey(r.key())
	q.slab.release(slot)
}

// lease delivers the ready message at slot: it leaves its key's FIFO, the key is charged one
// unit of deficit (receiving weight × quantum first if its turn has just begun), and a key whose
// deficit is spent passes the turn on. This is the only place DRR state changes besides keys
// joining and leaving the round, so replaying Lease commands reproduces it.
func (q *Queue) lease(slot uint32, r *rec, c *Lease) {
	k := r.key()
	ks := q.unlinkReady(r)
	if ks.deficit == 0 {
		ks.deficit = uint64(ks.weight) * uint64(q.cfg.Quantum)
	}
	ks.deficit--
	if ks.pending == 0 {
		q.leaveIfIdle(k, ks)
	} else if ks.deficit == 0 {
		q.active.moveToBack(k)
	}
	if r.attempts < ^uint32(0) {
		r.attempts++
	}
	q.addLease(slot, r, c.LeasedAt, c.ExpiresAt, c.Consumer)
}

// addLease puts a message that is in no other set in flight, without touching its attempts.
func (q *Queue) addLease(slot uint32, r *rec, leasedAt, expiresAt int64, consumer string) {
	l := q.freeLease
	if l == nilIdx {
		l = uint32(len(q.leases))
		q.leases = append(q.leases, leaseRec{})
	} else {
		q.freeLease = q.leases[l].slot
	}
	q.leases[l] = leaseRec{leasedAt: leasedAt, expiresAt: expiresAt, consumer: consumer, slot: slot}
	r.setState(stLeased)
	r.next, r.prev = l, nilIdx
	q.leaseHeap.push(expiresAt, slot)
	q.inFlight++
	q.leaseCounted(r, 1)
}

// unlease ends the lease of a leased message; the caller then reschedules or deletes it.
func (q *Queue) unlease(r *rec) {
	l := r.next
	q.leaseHeap.remove(q.leases[l].pos)
	q.leases[l] = leaseRec{slot: q.freeLease}
	q.freeLease = l
	if len(q.leaseHeap.ents) == 0 {
		q.leases, q.freeLease = q.leases[:0], nilIdx
	}
	r.setState(stFree)
	q.inFlight--
	q.leaseCounted(r, -1)
}

// detach takes a stored message out of whatever set holds it (ready FIFO, held list, delayed
// heap, lease); a waiting message is in none.
func (q *Queue) detach(r *rec) {
	switch r.state() {
	case stReady:
		if q.park.adm != nil {
			q.unparked(r) // a probe leaving
		}
		k := r.key()
		q.leaveIfIdle(k, q.unlinkReady(r))
	case stParked:
		q.unparked(r)
	case stUnclassified:
		q.uncl.parked--
	case stHeld:
		q.unlinkHeld(r)
	case stDelayed:
		q.delayed.remove(r.next)
		q.nDelayed--
	case stLeased:
		q.unlease(r)
	}
	r.setState(stFree)
}

// claimed returns the slot of a message a consumer may hold: leased, or held (whose lease may
// have gone unrecorded, see Hold).
func (q *Queue) claimed(id MsgID) (uint32, *rec, error) {
	slot, ok := q.index.find(id, q.slab)
	if !ok {
		return 0, nil, ErrMessageNotFound
	}
	r := q.slab.at(slot)
	if st := r.state(); st != stLeased && st != stHeld {
		return 0, nil, ErrMessageNotFound
	}
	return slot, r, nil
}
