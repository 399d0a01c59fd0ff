package engine

import "math"

// subState is one subscription (a live Consume) and its credit.
type subState struct {
	id        string
	credit    uint32
	unlimited bool
}

// Subscribe registers a subscription of consumer with the given credit: the number of messages
// it may still receive; 0 means unlimited. Deliveries rotate among subscriptions that have
// credit, in the order they subscribed. Subscriptions are live state of the node that runs
// Dispatch, not commands: they are not replayed. It fails with ErrSubscriptionExists.
func (q *Queue) Subscribe(consumer string, credit uint32) error {
	if _, ok := q.subIdx[consumer]; ok {
		return ErrSubscriptionExists
	}
	var i uint32
	if n := len(q.freeSubs); n > 0 {
		i = q.freeSubs[n-1]
		q.freeSubs = q.freeSubs[:n-1]
	} else {
		i = uint32(len(q.subs))
		q.subs = append(q.subs, subState{})
	}
	q.subs[i] = subState{id: consumer, credit: credit, unlimited: credit == 0}
	q.subIdx[consumer] = i
	q.credited.pushBack(i)
	q.WakeParked()
	return nil
}

// AddCredit gives consumer n more credit, saturating at math.MaxUint32; it does nothing for an
// unlimited subscription. A subscription whose credit was spent rejoins the rotation at its
// end. It fails with ErrSubscriptionNotFound.
func (q *Queue) AddCredit(consumer string, n uint32) error {
	i, ok := q.subIdx[consumer]
	if !ok {
		return ErrSubscriptionNotFound
	}
	s := &q.subs[i]
	if s.unlimited || n == 0 {
		return nil
	}
	if s.credit == 0 {
		q.credited.pushBack(i)
		q.WakeParked()
	}
	s.credit = uint32(min(uint64(s.credit)+uint64(n), math.MaxUint32))
	return nil
}

// Unsubscribe removes consumer's subscription. Its leases are untouched: they end by Ack, Nack
// or expiry like any other (concepts.md, "Leases"). It fails with ErrSubscriptionNotFound.
func (q *Queue) Unsubscribe(consumer string) error {
	i, ok := q.subIdx[consumer]
	if !ok {
		return ErrSubscriptionNotFound
	}
	if q.credited.contains(i) {
		q.credited.remove(i)
	}
	delete(q.subIdx, consumer)
	q.subs[i] = subState{}
	q.freeSubs = append(q.freeSubs, i)
	return nil
}

// Credit reports consumer's remaining credit and whether it is unlimited.
func (q *Queue) Credit(consumer string) (credit uint32, unlimited, ok bool) {
	i, ok := q.subIdx[consumer]
	if !ok {
		return 0, false, false
	}
	return q.subs[i].credit, q.subs[i].unlimited, true
}

// Dispatch makes up to max deliveries at time now and appends their Lease commands to dst,
// returning the extended slice (the caller owns it; no other allocation is made once dst has
// room). It first promotes delayed messages due at now. Each delivery takes the oldest ready
// message of the fairness key whose Deficit Round Robin turn it is, and the subscription
// whose turn it is among those with credit; the lease is applied at once (Attempts + 1,
// expiry now + VisibilityTimeoutMs, the subscription's credit − 1 unless unlimited). Nothing
// is delivered while no subscription has credit.
//
// The broker persists the returned leases (committed delivery durability) before sending the
// deliveries, and replays them with Apply; Get gives the message fields for the Delivery frame.
func (q *Queue) Dispatch(now int64, max int, dst []Lease) []Lease {
	q.advance(now)
	expires := addMs(now, q.cfg.VisibilityTimeoutMs)
	for ; max > 0; max-- {
		slot, sub, ok := q.pick(now)
		if !ok {
			break
		}
		r := q.slab.at(slot)
		c := Lease{ID: r.id, Consumer: q.subs[sub].id, LeasedAt: now, ExpiresAt: expires}
		q.lease(slot, r, &c)
		q.rates.count(r.key(), now)
		if q.park.adm != nil {
			q.leased(r.id)
		}
		q.spend(sub)
		dst = append(dst, c)
	}
	return dst
}

// pick chooses the next delivery: a message and the subscription to receive it. It is the one
// place that decides deliverability. Without an Admission it is O(1): the head message of the
// key holding the DRR turn, for the subscription holding the delivery turn; with one, see
// pickAdmitted (park.go).
func (q *Queue) pick(now int64) (slot, sub uint32, ok bool) {
	if q.credited.n == 0 {
		return 0, 0, false
	}
	if q.park.adm == nil {
		if q.active.n == 0 {
			return 0, 0, false
		}
		return q.keys[q.active.head].head, q.credited.head, true
	}
	return q.pickAdmitted(now)
}

// spend charges one delivery to subscription i and passes the delivery turn on.
func (q *Queue) spend(i uint32) {
	s := &q.subs[i]
	if !s.unlimited {
		s.credit--
		if s.credit == 0 {
			q.credited.remove(i)
			return
		}
	}
	q.credited.moveToBack(i)
}
