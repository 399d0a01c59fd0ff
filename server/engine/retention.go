package engine

// Queue limits (the broker's max_depth and retention_ms) read the enqueue order: the oldest
// stored messages are the ones a full queue dead-letters and the first to outlive a retention.
// These calls change nothing; the broker turns each ID into a Fail with DeadLetter set.

// OldestAcceptedAt returns the acceptance time (EnqueuedAt) of the first stored message in
// enqueue order; ok is false when the queue is empty. A redriven message joins the end of the
// order with its original acceptance time, so this is not always the smallest one stored.
func (q *Queue) OldestAcceptedAt() (at int64, ok bool) {
	if q.ohead == nilIdx {
		return 0, false
	}
	return q.slab.at(q.ohead).enqueuedAt, true
}

// AcceptedBy appends to dst the IDs of up to n stored messages accepted at or before cutoff,
// walking the enqueue order from the oldest and stopping at the first message accepted later,
// and returns the extended slice. It costs O(k) for k results.
func (q *Queue) AcceptedBy(cutoff int64, n int, dst []MsgID) []MsgID {
	for slot, taken := q.ohead, 0; slot != nilIdx && taken < n; taken++ {
		r := q.slab.at(slot)
		if r.enqueuedAt > cutoff {
			break
		}
		dst = append(dst, r.id)
		slot = r.onext
	}
	return dst
}

// OldestUnleased appends to dst the IDs of up to n stored messages that are not in flight, in
// enqueue order from the oldest, looking at no more than the walk oldest messages, and returns
// the extended slice. It costs O(walk) at most, however many leases come first.
func (q *Queue) OldestUnleased(n, walk int, dst []MsgID) []MsgID {
	for slot, taken := q.ohead, 0; slot != nilIdx && taken < n && walk > 0; walk-- {
		r := q.slab.at(slot)
		if r.state() != stLeased {
			dst = append(dst, r.id)
			taken++
		}
		slot = r.onext
	}
	return dst
}
