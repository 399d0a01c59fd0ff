package engine

// OldestReady returns the enqueue time (Unix ms) of the oldest message waiting at the head of a
// fairness key's ready (or held) list — the messages next in line — and false when nothing is
// ready. Each key's list is in the order its messages became ready, so a message that became ready
// late (after a delay or a retry backoff) counts once it reaches its key's head: the figure is
// exact for a queue without delays and retries, and a close lower bound otherwise. It costs
// O(k) for k fairness keys with ready messages (for metrics, read at scrape time).
func (q *Queue) OldestReady() (enqueuedAt int64, ok bool) {
	for i := range q.keys {
		ks := &q.keys[i]
		for _, head := range [2]uint32{ks.head, ks.heldHead} {
			if ks.refs == 0 || head == nilIdx {
				continue
			}
			if t := q.slab.at(head).enqueuedAt; !ok || t < enqueuedAt {
				enqueuedAt, ok = t, true
			}
		}
	}
	return enqueuedAt, ok
}

// LeasedAt returns when the lease of id began (Unix ms); false when id is not leased.
func (q *Queue) LeasedAt(id MsgID) (int64, bool) {
	if l, ok := q.leaseOf(id); ok {
		return l.leasedAt, true
	}
	return 0, false
}

// LeaseHolder returns the consumer a message is leased to and when its lease began (Unix ms),
// false when it is not leased.
func (q *Queue) LeaseHolder(id MsgID) (consumer string, leasedAt int64, leased bool) {
	if l, ok := q.leaseOf(id); ok {
		return l.consumer, l.leasedAt, true
	}
	return "", 0, false
}

// leaseOf returns the lease of a leased message.
func (q *Queue) leaseOf(id MsgID) (*leaseRec, bool) {
	slot, ok := q.index.find(id, q.slab)
	if !ok {
		return nil, false
	}
	r := q.slab.at(slot)
	if r.state() != stLeased {
		return nil, false
	}
	return &q.leases[r.next], true
}
