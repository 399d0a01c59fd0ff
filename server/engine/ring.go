package engine

// ring is a circular doubly-linked list over small integer indices (fairness keys,
// subscriptions), with a head. It is how the scheduler takes turns: the head has the turn,
// pushBack joins just before the head (the end of the round), advance passes the turn on.
// Every operation is O(1); members are found by index, so nothing ever scans the ring.
type ring struct {
	next, prev []uint32 // by element; nilIdx when the element is not a member
	head       uint32
	n          int
}

func newRing() ring { return ring{head: nilIdx} }

// ensure makes room for element indices below size.
func (r *ring) ensure(size int) {
	for len(r.next) < size {
		r.next = append(r.next, nilIdx)
		r.prev = append(r.prev, nilIdx)
	}
}

func (r *ring) contains(i uint32) bool {
	return int(i) < len(r.next) && r.next[i] != nilIdx
}

// pushBack makes i the last member of the round (just before the head). i must not be a member.
func (r *ring) pushBack(i uint32) {
	r.ensure(int(i) + 1)
	if r.head == nilIdx {
		r.next[i], r.prev[i], r.head = i, i, i
	} else {
		last := r.prev[r.head]
		r.next[last], r.prev[i] = i, last
		r.next[i], r.prev[r.head] = r.head, i
	}
	r.n++
}

// remove takes i out of the ring; if i had the turn, the next member gets it.
func (r *ring) remove(i uint32) {
	nx, pv := r.next[i], r.prev[i]
	if nx == i {
		r.head = nilIdx
	} else {
		r.next[pv], r.prev[nx] = nx, pv
		if r.head == i {
			r.head = nx
		}
	}
	r.next[i], r.prev[i] = nilIdx, nilIdx
	r.n--
}

// moveToBack sends member i to the end of the round. For the head this just passes the turn on.
func (r *ring) moveToBack(i uint32) {
	if i == r.head {
		r.head = r.next[i]
		return
	}
	r.remove(i)
	r.pushBack(i)
}
