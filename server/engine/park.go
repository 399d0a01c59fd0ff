package engine

import (
	"container/heap"
	"iter"
	"math"
)

// Admission is the per-subscription admission check of Dispatch: the broker's throttles. A Queue
// without one delivers every ready message to whichever subscription has the turn.
//
// Messages are grouped into classes: two messages of one class must be admitted alike by every
// subscription at any time (for throttles: they map to the same bucket of every throttle
// declared on the queue). The engine keeps a refused class parked until the time Admit gave,
// and only then asks again, so that a throttled backlog costs nothing while it waits and never
// blocks other classes, keys or subscriptions.
type Admission interface {
	// Class names the admission class of a ready message.
	Class(c Candidate) string
	// Admit reports whether the subscription consumer may receive a message of class at now.
	// Saying yes counts the delivery (Dispatch then makes it); saying no gives retryAt, the
	// earliest time at which the answer might change for this subscription.
	Admit(consumer, class string, now int64) (ok bool, retryAt int64)
}

// Candidate is what Admission.Class sees of a message. Attributes are shared with the engine and
// must not be modified.
type Candidate struct {
	ID          MsgID
	FairnessKey string
	Attributes  map[string]string
}

// parkGroup is the parked messages of one class: they wait, in the order they were refused,
// until wakeAt; then the oldest goes back to the front of its key's FIFO as the class's probe.
// While the probe is out, later messages of the class that reach the head of their key join the
// group (behind the rest) instead of being asked about. A delivered probe sends the next member
// out; a refused one comes back and the group waits again.
type parkGroup struct {
	class      string
	head, tail uint32 // members (stParked), linked through rec.next/prev
	n          int
	probe      uint32 // the member out in its key's FIFO, or nilIdx
	wakeAt     int64
	pos        int // in parking.wakes; -1 while the group is not waiting
}

// parking is the Queue's admission state. Like subscriptions and holds it is live state of the
// node that delivers: not commands, in no snapshot (the broker calls Unpark before one).
type parking struct {
	adm     Admission
	groups  []parkGroup
	free    []uint32
	byClass map[string]uint32
	of      map[MsgID]uint32 // group of every member and probe
	wakes   wakeHeap
	n       int  // parked members: the throttled count
	rewake  bool // subscriptions or credit changed: ask about every waiting group again
}

// SetAdmission installs a (nil: none). Every parked message first returns to its key's FIFO
// (see Unpark), as the classes of the old Admission mean nothing to the new one.
func (q *Queue) SetAdmission(a Admission) {
	q.Unpark()
	q.park.adm = a
	if a != nil && q.park.byClass == nil {
		q.park.byClass, q.park.of = map[string]uint32{}, map[MsgID]uint32{}
		q.park.wakes.groups = &q.park.groups
	}
}

// Throttled counts the messages parked by the Admission (held only by a throttle).
func (q *Queue) Throttled() int { return q.park.n }

// WakeParked has every parked class asked about again at the next Dispatch: call it when an
// Admission may now say yes earlier than it said (a throttle's limits loosened).
func (q *Queue) WakeParked() { q.park.rewake = len(q.park.wakes.idx) > 0 }

// ParkedClasses iterates over the parked classes with the number of messages waiting in each.
// The queue must not be changed during the iteration.
func (q *Queue) ParkedClasses() iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		for class, g := range q.park.byClass {
			if n := q.park.groups[g].n; n > 0 && !yield(class, n) {
				return
			}
		}
	}
}

// Unpark returns every parked message to the front of its key's FIFO, oldest of each class
// first, and forgets the classes. The broker calls it before a snapshot, so that snapshots only
// ever see ready messages in FIFOs.
func (q *Queue) Unpark() {
	p := &q.park
	if p.byClass == nil {
		return
	}
	for _, g := range p.byClass {
		pg := &p.groups[g]
		if pg.probe != nilIdx { // the probe goes back first, so that the members follow it
			r := q.slab.at(pg.probe)
			q.leaveIfIdle(r.key(), q.unlinkReady(r))
			q.parkFront(g, pg.probe, r)
			pg.probe = nilIdx
		}
		for slot := pg.tail; slot != nilIdx; {
			r := q.slab.at(slot)
			prev := r.prev
			q.prependReady(slot, r)
			slot = prev
		}
	}
	p.groups, p.free, p.n, p.rewake = p.groups[:0], p.free[:0], 0, false
	clear(p.byClass)
	clear(p.of)
	p.wakes.idx = p.wakes.idx[:0]
}

// pickAdmitted is pick with an Admission. It walks the keys in DRR order from the one holding
// the turn; a key's head is offered to the subscriptions with credit in rotation order, and the
// first that admits it receives it. A head no subscription admits now is parked with its class
// (as is a head whose class is already parked, without asking), and the key's next head is
// tried; a key left with nothing ready leaves the round. So the delivery always comes from the
// key holding the turn once the refused heads are out of the way, nothing refused is charged,
// and each message is asked about once per wake of its class.
func (q *Queue) pickAdmitted(now int64) (slot, sub uint32, ok bool) {
	q.wakeParked(now)
	k := q.active.head
	for n := q.active.n; n > 0 && q.active.n > 0; n-- {
		next := q.active.next[k]
		for q.keys[k].pending > 0 {
			slot := q.keys[k].head
			if s, ok := q.offer(slot, now); ok {
				return slot, s, true
			}
		}
		k = next
	}
	return 0, 0, false
}

// offer asks the subscriptions with credit about the ready message at slot, the head of its
// key; when none admits it, it is parked.
func (q *Queue) offer(slot uint32, now int64) (sub uint32, ok bool) {
	p := &q.park
	r := q.slab.at(slot)
	class := p.adm.Class(Candidate{ID: r.id, FairnessKey: q.keys[r.key()].name, Attributes: q.slab.body(slot).attributes})
	g, grouped := p.byClass[class]
	if grouped && p.groups[g].probe != slot {
		q.unlinkHead(r)
		q.parkBack(g, slot, r)
		return 0, false
	}
	retry := int64(math.MaxInt64)
	s := q.credited.head
	for range q.credited.n {
		ok, at := p.adm.Admit(q.subs[s].id, class, now)
		if ok {
			return s, true
		}
		retry = min(retry, at)
		s = q.credited.next[s]
	}
	q.unlinkHead(r)
	if grouped {
		p.groups[g].probe = nilIdx
	} else {
		g = q.newGroup(class)
	}
	q.parkFront(g, slot, r)
	p.groups[g].wakeAt = max(retry, now+1)
	heap.Push(&p.wakes, g)
	return 0, false
}

// leased tells the parking that the message at slot was delivered: a probe lets the next member
// of its class out, or its class ends.
func (q *Queue) leased(id MsgID) {
	p := &q.park
	g, ok := p.of[id]
	if !ok {
		return
	}
	delete(p.of, id)
	p.groups[g].probe = nilIdx
	q.sendProbe(g)
}

// unparked tells the parking that a ready or parked message is leaving (Ack, Fail or Remove
// applied to it in that state).
func (q *Queue) unparked(r *rec) {
	p := &q.park
	g, ok := p.of[r.id]
	if !ok {
		return
	}
	delete(p.of, r.id)
	pg := &p.groups[g]
	if pg.probe != nilIdx && q.slab.at(pg.probe) == r {
		pg.probe = nilIdx
		q.sendProbe(g)
		return
	}
	q.unlinkMember(pg, r)
	if pg.n == 0 && pg.probe == nilIdx {
		q.endGroup(g)
	}
}

// wakeParked sends out the probes of the classes whose time has come (all of them after
// WakeParked, Subscribe or AddCredit).
func (q *Queue) wakeParked(now int64) {
	p := &q.park
	for len(p.wakes.idx) > 0 {
		g := p.wakes.idx[0]
		if !p.rewake && p.groups[g].wakeAt > now {
			break
		}
		heap.Pop(&p.wakes)
		q.sendProbe(g)
	}
	p.rewake = false
}

// sendProbe puts the oldest member of group g at the front of its key's FIFO as the probe, or
// ends the group when it has none.
func (q *Queue) sendProbe(g uint32) {
	pg := &q.park.groups[g]
	if pg.n == 0 {
		q.endGroup(g)
		return
	}
	slot := pg.head
	r := q.slab.at(slot)
	q.unlinkMember(pg, r)
	pg.probe = slot
	q.prependReady(slot, r)
}

func (q *Queue) newGroup(class string) uint32 {
	p := &q.park
	var g uint32
	if n := len(p.free); n > 0 {
		g = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		g = uint32(len(p.groups))
		p.groups = append(p.groups, parkGroup{})
	}
	p.groups[g] = parkGroup{class: class, head: nilIdx, tail: nilIdx, probe: nilIdx, pos: -1}
	p.byClass[class] = g
	return g
}

func (q *Queue) endGroup(g uint32) {
	p := &q.park
	pg := &p.groups[g]
	if pg.pos >= 0 {
		heap.Remove(&p.wakes, pg.pos)
	}
	delete(p.byClass, pg.class)
	*pg = parkGroup{head: nilIdx, tail: nilIdx, probe: nilIdx, pos: -1}
	p.free = append(p.free, g)
}

// unlinkHead takes the head of a key's FIFO out of it (leaving the round if nothing else is
// ready there).
func (q *Queue) unlinkHead(r *rec) {
	k := r.key()
	q.leaveIfIdle(k, q.unlinkReady(r))
}

func (q *Queue) parkBack(g, slot uint32, r *rec) {
	pg := &q.park.groups[g]
	r.setState(stParked)
	r.next, r.prev = nilIdx, pg.tail
	if pg.tail == nilIdx {
		pg.head = slot
	} else {
		q.slab.at(pg.tail).next = slot
	}
	pg.tail = slot
	pg.n++
	q.park.n++
	q.park.of[r.id] = g
}

func (q *Queue) parkFront(g, slot uint32, r *rec) {
	pg := &q.park.groups[g]
	r.setState(stParked)
	r.prev, r.next = nilIdx, pg.head
	if pg.head == nilIdx {
		pg.tail = slot
	} else {
		q.slab.at(pg.head).prev = slot
	}
	pg.head = slot
	pg.n++
	q.park.n++
	q.park.of[r.id] = g
}

// unlinkMember takes a parked member out of its group's list (it stays in parking.of).
func (q *Queue) unlinkMember(pg *parkGroup, r *rec) {
	if r.prev == nilIdx {
		pg.head = r.next
	} else {
		q.slab.at(r.prev).next = r.next
	}
	if r.next == nilIdx {
		pg.tail = r.prev
	} else {
		q.slab.at(r.next).prev = r.prev
	}
	pg.n--
	q.park.n--
	r.setState(stFree)
}

// prependReady links a stored, not ready message at the front of its key's FIFO; a key that
// gains its first ready message joins the end of the DRR round.
func (q *Queue) prependReady(slot uint32, r *rec) {
	r.setState(stReady)
	k := r.key()
	ks := &q.keys[k]
	r.prev, r.next = nilIdx, ks.head
	if ks.head == nilIdx {
		ks.tail = slot
	} else {
		q.slab.at(ks.head).prev = slot
	}
	ks.head = slot
	ks.pending++
	q.ready++
	if ks.pending == 1 {
		q.active.pushBack(k)
	}
}

// wakeHeap orders the waiting groups by wake time (container/heap).
type wakeHeap struct {
	idx    []uint32
	groups *[]parkGroup
}

func (h *wakeHeap) Len() int { return len(h.idx) }
func (h *wakeHeap) Less(i, j int) bool {
	gs := *h.groups
	return gs[h.idx[i]].wakeAt < gs[h.idx[j]].wakeAt
}
func (h *wakeHeap) Swap(i, j int) {
	gs := *h.groups
	h.idx[i], h.idx[j] = h.idx[j], h.idx[i]
	gs[h.idx[i]].pos, gs[h.idx[j]].pos = i, j
}
func (h *wakeHeap) Push(x any) {
	g := x.(uint32)
	(*h.groups)[g].pos = len(h.idx)
	h.idx = append(h.idx, g)
}
func (h *wakeHeap) Pop() any {
	g := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	(*h.groups)[g].pos = -1
	return g
}

// nextParkWake is the earliest wake time of a parked class.
func (q *Queue) nextParkWake() (int64, bool) {
	if len(q.park.wakes.idx) == 0 {
		return 0, false
	}
	return q.park.groups[q.park.wakes.idx[0]].wakeAt, true
}
