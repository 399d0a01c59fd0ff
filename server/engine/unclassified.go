package engine

import "fmt"

// Unclassified (parked) messages (concepts.md, "When on_enqueue fails"). A message whose
// on_enqueue failed on a parking queue is stored unclassified (Message.Unclassified): in the
// queue it is parked (stUnclassified, reported as StateUnclassified; not to be confused with the messages
// the Admission parks, park.go) — counted in the depth, in no
// FIFO, heap, ring or ordering group, never delivered — until a Classify command gives it the
// fairness key, weight, not-before time, attributes and group its script decided, and schedules
// it like a new message. ClassifyFailed counts a failed try. A dead-letter queue
// (DeliverUnclassified) stores such messages as it stores any other, keeping the flag for
// redrive.
//
// The flag and the count of failed tries live in a side map, for unclassified messages only.

// unclassifiedTable holds a Queue's unclassified messages.
type unclassifiedTable struct {
	tries   map[uint32]uint32 // failed classification tries by slot, for every unclassified message
	parked  int               // of which parked (stUnclassified)
	deliver bool              // DeliverUnclassified: never park
}

// DeliverUnclassified makes the queue store unclassified messages as it stores any other, keeping
// them unclassified (Message.Unclassified) without parking them: a dead-letter queue is such a
// queue. Call it on a new queue, before anything is stored; it is not a command (the broker sets
// it up the same way wherever the queue is built).
func (q *Queue) DeliverUnclassified() { q.uncl.deliver = true }

// DeliverUnclassified is Queue.DeliverUnclassified for the queue being restored; call it before
// AddMessage.
func (r *Restorer) DeliverUnclassified() {
	if r.q != nil {
		r.q.DeliverUnclassified()
	}
}

// markUnclassified records that the message stored at slot was never classified.
func (q *Queue) markUnclassified(slot, tries uint32) {
	if q.uncl.tries == nil {
		q.uncl.tries = make(map[uint32]uint32)
	}
	q.uncl.tries[slot] = tries
}

// parksUnclassified reports whether a message being stored is parked rather than placed.
func (q *Queue) parksUnclassified(m *Message) bool { return m.Unclassified && !q.uncl.deliver }

// parkUnclassified puts a stored message in no set into the parked state.
func (q *Queue) parkUnclassified(r *rec) {
	r.setState(stUnclassified)
	q.uncl.parked++
}

// forgetUnclassified drops what the side map knows of a slot being deleted (detached first).
func (q *Queue) forgetUnclassified(slot uint32) {
	if q.uncl.tries != nil {
		delete(q.uncl.tries, slot)
	}
}

// unclassifiedTries returns the failed tries of the message at slot and whether it is unclassified.
func (q *Queue) unclassifiedTries(slot uint32) (uint32, bool) {
	n, ok := q.uncl.tries[slot]
	return n, ok
}

// Unclassified returns the number of parked unclassified messages.
func (q *Queue) Unclassified() int { return q.uncl.parked }

// AppendUnclassified appends the IDs of the parked messages to dst, in no particular order. It
// costs O(parked).
func (q *Queue) AppendUnclassified(dst []MsgID) []MsgID {
	for slot := range q.uncl.tries {
		if r := q.slab.at(slot); r.state() == stUnclassified {
			dst = append(dst, r.id)
		}
	}
	return dst
}

// OldestUnclassified returns the acceptance time of the oldest parked message (ok false when none is).
// It costs O(parked).
func (q *Queue) OldestUnclassified() (at int64, ok bool) {
	for slot := range q.uncl.tries {
		r := q.slab.at(slot)
		if r.state() == stUnclassified && (!ok || r.enqueuedAt < at) {
			at, ok = r.enqueuedAt, true
		}
	}
	return at, ok
}

// Classification is what on_enqueue decided for a stored message.
type Classification struct {
	FairnessKey string // "" means DefaultFairnessKey
	Weight      uint32 // 0 means 1
	NotBefore   int64
	Attributes  map[string]string
	Grouped     bool
	Group       string
}

// Classify schedules a parked message with the classification its script gave it, at At: ready
// if NotBefore is at or before At, else delayed; in the ordering group it names, at the group's
// tail.
type Classify struct {
	ID    MsgID
	At    int64
	Class Classification
}

// ClassifyFailed counts one failed classification try of a parked message.
type ClassifyFailed struct {
	ID MsgID
}

func (Classify) command()       {}
func (ClassifyFailed) command() {}

var (
	_ Command = Classify{}
	_ Command = ClassifyFailed{}
)

// ErrNotUnclassified reports a classification of a message that is not parked unclassified.
var ErrNotUnclassified = fmt.Errorf("engine: message is not parked unclassified")

// unclassifiedSlot finds a parked message.
func (q *Queue) unclassifiedSlot(id MsgID) (uint32, *rec, error) {
	slot, ok := q.index.find(id, q.slab)
	if !ok {
		return 0, nil, ErrMessageNotFound
	}
	r := q.slab.at(slot)
	if r.state() != stUnclassified {
		return 0, nil, fmt.Errorf("%w: %v is %s", ErrNotUnclassified, id, stateText(r.state()))
	}
	return slot, r, nil
}

// ApplyClassify applies a Classify (after promoting delayed messages due at c.At). It fails with
// ErrMessageNotFound or ErrNotUnclassified.
func (q *Queue) ApplyClassify(c Classify) error {
	slot, r, err := q.unclassifiedSlot(c.ID)
	if err != nil {
		return err
	}
	q.advance(c.At)
	name := c.Class.FairnessKey
	if name == "" {
		name = DefaultFairnessKey
	}
	old := r.key()
	k := q.internKey(name)
	w := max(c.Class.Weight, 1)
	q.keys[k].weight = w
	q.keys[k].refs++
	r = q.slab.at(slot) // internKey may not move records, but stay safe against future changes
	r.meta = r.meta&^metaKeyMask | k
	q.unrefKey(old)
	r.weight, r.notBefore = w, c.Class.NotBefore
	b := q.slab.body(slot)
	if b.attributes != nil || c.Class.Attributes != nil {
		b.attributes = c.Class.Attributes
		q.slab.setBody(slot, b)
	}
	delete(q.uncl.tries, slot)
	q.detach(r)
	if c.Class.Grouped {
		q.joinGroup(slot, r, c.Class.Group)
	}
	q.place(slot, r, c.At)
	return nil
}

// ApplyClassifyFailed applies a ClassifyFailed and returns the message's failed tries. It fails
// with ErrMessageNotFound or ErrNotUnclassified.
func (q *Queue) ApplyClassifyFailed(c ClassifyFailed) (uint32, error) {
	slot, _, err := q.unclassifiedSlot(c.ID)
	if err != nil {
		return 0, err
	}
	n := q.uncl.tries[slot]
	if n < ^uint32(0) {
		n++
	}
	q.uncl.tries[slot] = n
	return n, nil
}
