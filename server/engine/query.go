package engine

import (
	"cmp"
	"iter"
	"math"
	"slices"
)

// message rebuilds the Message stored at slot.
func (q *Queue) message(slot uint32) Message {
	r := q.slab.at(slot)
	b := q.slab.body(slot)
	m := Message{
		ID:           r.id,
		Queue:        q.name,
		Headers:      b.headers,
		Payload:      b.payload,
		Attributes:   b.attributes,
		FairnessKey:  q.keys[r.key()].name,
		Weight:       r.weight,
		EnqueuedAt:   r.enqueuedAt,
		NotBefore:    r.notBefore,
		Attempts:     r.attempts,
		RedriveCount: r.redrives,
		State:        State(r.state()),
	}
	if st := r.state(); st == stHeld || st == stWaiting || st == stParked {
		m.State = StateReady
	}
	m.Group, m.Grouped = q.groupOf(slot, r)
	if r.meta&metaHasError != 0 {
		m.LastError = q.errs[slot]
	}
	if st := r.state(); st == stUnclassified {
		m.State = StateUnclassified
	}
	if tries, ok := q.unclassifiedTries(slot); ok {
		m.Unclassified, m.ClassifyTries = true, tries
	}
	if m.State == StateLeased {
		l := &q.leases[r.next]
		m.LeasedAt, m.LeaseExpiresAt, m.Consumer = l.leasedAt, l.expiresAt, l.consumer
	}
	return m
}

// Get returns the stored message id, with its state and lease (a held message is reported as
// ready, see Hold).
func (q *Queue) Get(id MsgID) (Message, bool) {
	slot, ok := q.index.find(id, q.slab)
	if !ok {
		return Message{}, false
	}
	return q.message(slot), true
}

// Messages iterates over the stored messages in enqueue order, oldest first, in every state (for
// snapshots, recovery checks, inspection and redrive; held messages are reported as ready). The
// queue must not be changed during the iteration.
func (q *Queue) Messages() iter.Seq[Message] {
	return func(yield func(Message) bool) {
		for slot := q.ohead; slot != nilIdx; slot = q.slab.at(slot).onext {
			if !yield(q.message(slot)) {
				return
			}
		}
	}
}

// Oldest appends to dst up to n stored messages in enqueue order, oldest first (n ≤ 0: all),
// and returns the extended slice. Redrive takes its batch from the dead-letter queue this way.
// A redriven message re-enters the enqueue order at its end.
func (q *Queue) Oldest(n int, dst []Message) []Message {
	taken := 0
	for slot := q.ohead; slot != nilIdx && (n <= 0 || taken < n); slot = q.slab.at(slot).onext {
		dst = append(dst, q.message(slot))
		taken++
	}
	return dst
}

// Expired appends to dst the IDs of the leases whose expiry is at or before now, earliest
// expiry first (equal expiries by message ID), and returns the extended slice. It does not change the queue: the broker turns
// each into DecideFailure(id, now, "lease expired", nil) and applies the Fail. It costs
// O(k log k) for k expired leases, whatever the number in flight.
func (q *Queue) Expired(now int64, dst []MsgID) []MsgID {
	due := q.leaseHeap.due(now, q.scratch[:0])
	slices.SortFunc(due, q.leaseHeap.compare)
	for _, e := range due {
		dst = append(dst, q.slab.at(e.ref).id)
	}
	q.scratch = due[:0]
	return dst
}

// NextWakeup returns the earliest time at which the queue changes by itself — a delayed message
// becoming ready, a lease expiring, a hold ending or a parked class to be asked about again — so the broker can arm one timer; ok is
// false when there is no such time. The time may already have passed if the broker has not yet
// handled it.
func (q *Queue) NextWakeup() (at int64, ok bool) {
	at = math.MaxInt64
	if t, has := q.delayed.top(); has {
		at, ok = t.at, true
	}
	if t, has := q.leaseHeap.top(); has && t.at < at {
		at, ok = t.at, true
	}
	if q.nHeld > 0 && q.holdUntil < at {
		at, ok = q.holdUntil, true
	}
	// A parked class is asked about again only when a subscription has credit (Dispatch does
	// it; Subscribe and AddCredit wake every class), so without credit its time is no wake-up.
	if t, has := q.nextParkWake(); has && t < at && q.credited.n > 0 {
		at, ok = t, true
	}
	if !ok {
		return 0, false
	}
	return at, true
}

// Stats is a snapshot of a queue's counters (the engine's part of GetStats).
type Stats struct {
	// Depth counts stored messages that are not leased: ready, held, delayed and waiting for a
	// retry.
	Depth uint64
	// InFlight counts leased messages.
	InFlight uint64
	// Delayed counts messages not yet eligible for delivery (enqueue delay or retry delay), as
	// of the last promotion (Advance, Dispatch or a timed command). On an ordered queue only
	// group heads are counted: a message behind its head waits for it whatever its own delay.
	Delayed uint64
	// Held counts ready messages kept from delivery by Hold (live state; zero after a replay
	// or restore).
	Held uint64
	// Throttled counts ready messages parked because no subscription's Admission admits them
	// (live state, see SetAdmission).
	Throttled uint64
	// Unclassified counts parked unclassified messages (see Classify); OldestUnclassifiedAt is the
	// acceptance time of the oldest (Unix ms; 0 when none is parked).
	Unclassified         uint64
	OldestUnclassifiedAt int64
	// ActiveFairnessKeys counts fairness keys with ready messages: the DRR round.
	ActiveFairnessKeys uint64
	// ActiveConsumers counts subscriptions (live state; zero after a replay).
	ActiveConsumers uint32
	// Quantum is the DRR quantum.
	Quantum uint32
	// OrderingGroups counts ordering groups with stored messages (0 for an unordered queue).
	OrderingGroups uint64
	// BlockedGroups counts ordering groups whose head is in flight: nothing else of the group
	// is delivered until it is acked, nacked or expires.
	BlockedGroups uint64
	// Keys has one entry per fairness key with a stored message, sorted by key.
	Keys []KeyStats
}

// KeyStats is the scheduler state of one fairness key.
type KeyStats struct {
	// Key is the fairness key.
	Key string
	// Pending counts the key's ready messages (not the held ones).
	Pending uint64
	// Deficit is the key's remaining DRR deficit in its current turn.
	Deficit int64
	// Weight is the weight of the key's most recently enqueued message.
	Weight uint32
}

// Stats returns the queue's counters. Keys is a new slice owned by the caller. It costs
// O(k log k) for k stored fairness keys.
func (q *Queue) Stats() Stats {
	s := q.Counts()
	s.Keys = make([]KeyStats, 0, len(q.keyIdx))
	for i := range q.keys {
		ks := &q.keys[i]
		if ks.refs == 0 {
			continue
		}
		s.Keys = append(s.Keys, KeyStats{
			Key:     ks.name,
			Pending: uint64(ks.pending),
			Deficit: int64(min(ks.deficit, math.MaxInt64)),
			Weight:  ks.weight,
		})
	}
	slices.SortFunc(s.Keys, func(a, b KeyStats) int { return cmp.Compare(a.Key, b.Key) })
	return s
}
