package engine

// Ordering groups (ordering.md). The broker decides a message's group at enqueue (Message.Group,
// Message.Grouped) and the engine keeps, for every group with stored messages, the list of its
// messages in enqueue order. Only a group's head — its oldest stored message — is ever ready,
// delayed, held or leased; every message behind it waits (stWaiting), in no FIFO, heap or ring.
// So a group with a leased, delayed or retrying head delivers nothing, and the DRR round, whose
// FIFOs hold ready heads beside unordered messages, picks among group heads without looking at
// groups at all: a ready head sits in the FIFO of its own fairness key (a group belongs to its
// head's key), and Dispatch stays O(1) per delivery whatever the number of groups.
//
// When the head leaves the queue (Ack, dead-lettering, Remove) the next message becomes the head
// and is scheduled at the command's time: ready if its NotBefore has passed, else delayed. A
// retried head (Fail without DeadLetter) keeps its place: it waits for its retry delay as the
// head, and the group waits with it. A redriven message is enqueued anew, at the group's tail.
//
// Throttles: a head that the Admission refuses is parked with its class (park.go); the messages
// behind it are in no FIFO, so a throttled head holds its group with no further work.
//
// Memory: a group costs one groupState (32 bytes), one map entry and its name while it has
// stored messages, and nothing once its last message is gone (its slot is reused; the tables
// keep their high-water size until the queue has no group left, then are dropped); a grouped
// message costs 12 bytes of links in a side table (allocated per slab chunk, only for chunks
// that hold grouped messages).

// groupState is one ordering group with stored messages: its members in enqueue order.
type groupState struct {
	name       string
	head, tail uint32 // slots, linked through glink
	n          uint32 // stored members
}

// glink is a grouped message's place in its group: the group's index and its neighbours.
type glink struct{ group, next, prev uint32 }

// groupTable holds a Queue's ordering groups.
type groupTable struct {
	list  []groupState
	idx   map[string]uint32
	free  []uint32
	links [][]glink // by slab chunk; a nil chunk holds no grouped message
	// off: groups are kept (Get and snapshots report them, DeadLetterCopy carries them) but
	// hold nothing back; see DisableOrdering.
	off bool
	// leased counts grouped messages in flight: groups blocked by an in-flight head.
	leased int
}

// DisableOrdering makes the queue keep its messages' groups without ordering by them: every
// message is scheduled as if ungrouped. A dead-letter queue is such a queue: its messages keep
// their groups for redrive, and any of them may be redriven or delivered first. Call it on a new
// queue, before anything is stored; it is not a command (the broker sets it up the same way
// wherever the queue is built).
func (q *Queue) DisableOrdering() { q.groups.off = true }

// DisableOrdering is Queue.DisableOrdering for the queue being restored; call it before
// AddMessage.
func (r *Restorer) DisableOrdering() {
	if r.q != nil {
		r.q.DisableOrdering()
	}
}

// link returns the group links of slot, allocating its chunk's table if needed.
func (g *groupTable) link(slot uint32) *glink {
	c, i := int(slot>>chunkShift), int(slot&chunkMask)
	for len(g.links) <= c {
		g.links = append(g.links, nil)
	}
	ls := g.links[c]
	if i >= len(ls) {
		n := max(i+1, min(2*len(ls), chunkSize), firstChunk)
		if c > 0 {
			n = chunkSize
		}
		grown := make([]glink, n)
		copy(grown, ls)
		ls = grown
		g.links[c] = ls
	}
	return &ls[i]
}

// joinGroup appends a stored message to the tail of group name (creating the group), and
// reports whether it is the group's head.
func (q *Queue) joinGroup(slot uint32, r *rec, name string) bool {
	g := &q.groups
	gi, ok := g.idx[name]
	if !ok {
		if g.idx == nil {
			g.idx = make(map[string]uint32)
		}
		if n := len(g.free); n > 0 {
			gi = g.free[n-1]
			g.free = g.free[:n-1]
		} else {
			gi = uint32(len(g.list))
			g.list = append(g.list, groupState{})
		}
		g.list[gi] = groupState{name: name, head: nilIdx, tail: nilIdx}
		g.idx[name] = gi
	}
	gs := &g.list[gi]
	*g.link(slot) = glink{group: gi, next: nilIdx, prev: gs.tail}
	if gs.tail == nilIdx {
		gs.head = slot
	} else {
		g.link(gs.tail).next = slot
	}
	gs.tail = slot
	gs.n++
	r.meta |= metaGrouped
	return gs.head == slot
}

// leaveGroup takes a stored message out of its group, forgetting the group when it has no
// member left. It returns the slot of the group's new head when the message was the head and
// another follows (nilIdx otherwise), for the caller to schedule.
func (q *Queue) leaveGroup(slot uint32, r *rec) uint32 {
	if r.meta&metaGrouped == 0 {
		return nilIdx
	}
	g := &q.groups
	l := g.link(slot)
	gs := &g.list[l.group]
	wasHead := gs.head == slot
	if l.prev == nilIdx {
		gs.head = l.next
	} else {
		g.link(l.prev).next = l.next
	}
	if l.next == nilIdx {
		gs.tail = l.prev
	} else {
		g.link(l.next).prev = l.prev
	}
	gs.n--
	next := nilIdx
	if wasHead {
		next = gs.head
	}
	gi := l.group
	*l = glink{}
	r.meta &^= metaGrouped
	if gs.n == 0 {
		delete(g.idx, gs.name)
		*gs = groupState{}
		if len(g.idx) == 0 { // the last group is gone: give the tables back (a Go map never shrinks)
			g.idx, g.list, g.free, g.links = nil, nil, nil, nil
		} else {
			g.free = append(g.free, gi)
		}
	}
	return next
}

// waits reports whether a stored message is behind the head of its group, so that it may not be
// scheduled yet.
func (q *Queue) waits(slot uint32, r *rec) bool {
	if r.meta&metaGrouped == 0 || q.groups.off {
		return false
	}
	return q.groups.list[q.groups.link(slot).group].head != slot
}

// place schedules a stored message that is in no set (see schedule), or makes it wait when it
// is behind the head of its group.
func (q *Queue) place(slot uint32, r *rec, now int64) {
	if q.waits(slot, r) {
		r.setState(stWaiting)
		return
	}
	q.schedule(slot, r, now)
}

// drop deletes a stored message that is in no set any more (see delete) at time now; when it
// was the head of its group, the next message of the group becomes the head and is scheduled.
func (q *Queue) drop(slot uint32, r *rec, now int64) {
	next := q.leaveGroup(slot, r)
	q.delete(slot, r)
	if next != nilIdx && !q.groups.off {
		q.schedule(next, q.slab.at(next), now)
	}
}

// groupOf returns the group of a stored message ("", false when it has none).
func (q *Queue) groupOf(slot uint32, r *rec) (string, bool) {
	if r.meta&metaGrouped == 0 {
		return "", false
	}
	return q.groups.list[q.groups.link(slot).group].name, true
}

// leaseCounted adjusts the count of in-flight grouped messages when a lease starts (+1) or ends
// (−1).
func (q *Queue) leaseCounted(r *rec, delta int) {
	if r.meta&metaGrouped != 0 && !q.groups.off {
		q.groups.leased += delta
	}
}

// GroupOrder iterates over the messages of ordering group name, head first (empty for a group
// with no stored message). The queue must not be changed during the iteration.
func (q *Queue) GroupOrder(name string) func(yield func(MsgID) bool) {
	return func(yield func(MsgID) bool) {
		gi, ok := q.groups.idx[name]
		if !ok {
			return
		}
		for slot := q.groups.list[gi].head; slot != nilIdx; slot = q.groups.link(slot).next {
			if !yield(q.slab.at(slot).id) {
				return
			}
		}
	}
}
