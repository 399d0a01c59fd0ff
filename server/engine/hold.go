package engine

// Hold keeps every message that is ready at now from being delivered until until (Unix ms): they
// leave the FIFOs (and keys with nothing else ready leave the round, their deficits reset) into
// a held set. It first promotes the delayed messages due at now, as Advance does.
//
// It is the reclaim grace of fast delivery durability (clustering.md): a leader taking over a
// fast queue cannot know which messages the old leader had leased, so it holds them all.
// CheckLease and DecideFailure accept held messages, so that Ack and Nack work on them;
// DecideExtend / ApplyExtend of a held message leases it to Extend.Consumer until the new
// expiry, without counting an attempt. Messages that become ready after Hold (enqueued, retried,
// promoted) are delivered normally. At until — NextWakeup reports it, and every timed command,
// Advance and Dispatch promote it — every message still held becomes ready again, in enqueue
// order and without counting an attempt.
//
// Hold is not a command: like subscriptions, it is the live state of the node that delivers
// (the leader decides it when it takes over a fast queue), and replays and snapshots know
// nothing of it. SnapshotKeys, ReadyOrder and Messages (and Get) report held messages as ready,
// in the FIFO order they will have when released. Calling Hold again holds what has become
// ready since and replaces until; an until at or before now ends the hold at once.
//
// Hold walks every stored message once (O(n)), and so does the release.
func (q *Queue) Hold(now, until int64) {
	q.Unpark()
	q.advance(now)
	if until <= now {
		q.release()
		return
	}
	q.holdUntil = until
	if q.ready == 0 {
		return
	}
	// Every key's held list is rebuilt in enqueue order, over what was held before and what is
	// ready now.
	for k := range q.keys {
		ks := &q.keys[k]
		if ks.refs == 0 {
			continue
		}
		if ks.pending > 0 {
			q.active.remove(uint32(k))
		}
		ks.deficit, ks.pending, ks.head, ks.tail = 0, 0, nilIdx, nilIdx
		ks.held, ks.heldHead, ks.heldTail = 0, nilIdx, nilIdx
	}
	for slot := q.ohead; slot != nilIdx; {
		r := q.slab.at(slot)
		next := r.onext
		if st := r.state(); st == stReady || st == stHeld {
			q.appendHeld(slot, r)
		}
		slot = next
	}
	q.nHeld += q.ready
	q.ready = 0
}

// SetHoldEnd moves the end of the current hold to until, holding nothing more (unlike Hold,
// which also holds what has become ready since); an until at or before now ends it at once, as
// reaching its end does: every held message becomes ready again, in enqueue order and without
// counting an attempt, after the delayed messages due before now. It changes nothing when no
// message is held. A leader that took a queue over before it could confirm the queue's
// definition current sets the hold it took over with to what the definition says once it can
// (a committed queue's leases were logged: nothing to hold; a fast queue's grace may differ).
func (q *Queue) SetHoldEnd(now, until int64) {
	if q.nHeld == 0 {
		return
	}
	q.holdUntil = until
	q.advance(now)
}

// Held reports how many messages are held (see Hold).
func (q *Queue) Held() int { return q.nHeld }

// appendHeld links a message at the end of its key's held list. The queue-wide count is the
// caller's business.
func (q *Queue) appendHeld(slot uint32, r *rec) {
	r.setState(stHeld)
	ks := &q.keys[r.key()]
	r.next, r.prev = nilIdx, ks.heldTail
	if ks.heldTail == nilIdx {
		ks.heldHead = slot
	} else {
		q.slab.at(ks.heldTail).next = slot
	}
	ks.heldTail = slot
	ks.held++
}

// unlinkHeld takes a held message out of its key's held list (Ack, Nack, Extend, Remove).
func (q *Queue) unlinkHeld(r *rec) {
	ks := &q.keys[r.key()]
	if r.prev == nilIdx {
		ks.heldHead = r.next
	} else {
		q.slab.at(r.prev).next = r.next
	}
	if r.next == nilIdx {
		ks.heldTail = r.prev
	} else {
		q.slab.at(r.next).prev = r.prev
	}
	ks.held--
	q.nHeld--
	r.setState(stFree)
}

// release ends the hold: every held message joins the end of its key's FIFO, in enqueue order,
// so keys without ready messages join the round in the order of their oldest held message.
func (q *Queue) release() {
	if q.nHeld == 0 {
		return
	}
	for slot, n := q.ohead, q.nHeld; n > 0; {
		r := q.slab.at(slot)
		next := r.onext
		if r.state() == stHeld {
			q.makeReady(slot, r)
			n--
		}
		slot = next
	}
	for k := range q.keys {
		if ks := &q.keys[k]; ks.held > 0 {
			ks.held, ks.heldHead, ks.heldTail = 0, nilIdx, nilIdx
		}
	}
	q.nHeld = 0
}
