package engine

import (
	"bytes"
	"fmt"
	"slices"
)

// Apply applies one command and reports whether it was refused. A refused command changes
// nothing, except possibly the promotion of delayed messages its time implies (see Command),
// which Advance could have made anyway. It is the replay entry point (every Command type is
// handled here); the typed Apply* methods do the same and also return what the broker needs
// next.
func (q *Queue) Apply(c Command) error {
	var err error
	switch c := c.(type) {
	case Enqueue:
		err = q.ApplyEnqueue(c)
	case Lease:
		err = q.ApplyLease(c)
	case Ack:
		err = q.ApplyAck(c)
	case Extend:
		err = q.ApplyExtend(c)
	case Fail:
		_, err = q.ApplyFail(c)
	case Remove:
		_, err = q.ApplyRemove(c)
	case UpdateConfig:
		err = q.ApplyUpdateConfig(c)
	case Classify:
		err = q.ApplyClassify(c)
	case ClassifyFailed:
		_, err = q.ApplyClassifyFailed(c)
	default:
		err = fmt.Errorf("engine: unknown command %T", c)
	}
	return err
}

// ApplyEnqueue stores c.Msgs in order, after promoting delayed messages due at c.At. Each
// message is ready if its NotBefore is at or before c.At, else delayed. Empty fairness keys
// become DefaultFairnessKey and zero weights 1; Queue, State and the lease fields are ignored.
// It fails, storing nothing, with ErrDuplicateID if an ID is already stored or repeated, and
// with ErrQueueFull if the queue cannot hold them.
func (q *Queue) ApplyEnqueue(c Enqueue) error {
	if err := q.checkNew(c.Msgs); err != nil {
		return err
	}
	q.advance(c.At)
	for i := range c.Msgs {
		q.insert(&c.Msgs[i], c.At)
	}
	return nil
}

// checkNew verifies that msgs can all be stored: no ID already stored or repeated, and room
// for them (conservatively assuming each brings a new fairness key).
func (q *Queue) checkNew(msgs []Message) error {
	if uint64(q.slab.live)+uint64(len(msgs)) > uint64(maxSlots) {
		return fmt.Errorf("%w: %d messages", ErrQueueFull, q.slab.live)
	}
	if len(q.keys)-len(q.freeKeys)+len(msgs) > maxKeys {
		return fmt.Errorf("%w: %d fairness keys", ErrQueueFull, len(q.keyIdx))
	}
	for i := range msgs {
		if _, ok := q.index.find(msgs[i].ID, q.slab); ok {
			return fmt.Errorf("%w: %v", ErrDuplicateID, msgs[i].ID)
		}
	}
	switch n := len(msgs); {
	case n == 2:
		if msgs[0].ID == msgs[1].ID {
			return fmt.Errorf("%w: %v", ErrDuplicateID, msgs[0].ID)
		}
	case n > 2:
		ids := q.ids[:0]
		for i := range msgs {
			ids = append(ids, msgs[i].ID)
		}
		slices.SortFunc(ids, func(a, b MsgID) int { return bytes.Compare(a[:], b[:]) })
		q.ids = ids[:0]
		for i := 1; i < len(ids); i++ {
			if ids[i] == ids[i-1] {
				return fmt.Errorf("%w: %v", ErrDuplicateID, ids[i])
			}
		}
	}
	return nil
}

// ApplyLease leases a ready message (after promoting delayed messages due at c.LeasedAt): its
// attempt count goes up by one, it is in flight until c.ExpiresAt, and its fairness key is
// charged as a DRR delivery. It fails with ErrMessageNotFound or ErrNotReady (a held message is
// not ready). Dispatch makes and applies leases itself; this method is for replay.
func (q *Queue) ApplyLease(c Lease) error {
	slot, ok := q.index.find(c.ID, q.slab)
	if !ok {
		return ErrMessageNotFound
	}
	q.advance(c.LeasedAt)
	r := q.slab.at(slot)
	if r.state() != stReady {
		return fmt.Errorf("%w: %v is %s", ErrNotReady, c.ID, stateText(r.state()))
	}
	q.lease(slot, r, &c)
	return nil
}

// ApplyAck deletes a stored message in any state (after promoting delayed messages due at c.At):
// leased (the leader checks the lease with CheckLease first), or ready, held or delayed (a
// fast-durability queue, whose leases are not commands, replaying or replicating the Ack). When
// it was the head of an ordering group, the next message of the group is scheduled at c.At. It
// fails with ErrMessageNotFound only if the ID is not stored. (Lease expiry is not checked here:
// the broker checks it with CheckLease or by handling Expired first.)
func (q *Queue) ApplyAck(c Ack) error {
	slot, ok := q.index.find(c.ID, q.slab)
	if !ok {
		return ErrMessageNotFound
	}
	q.advance(c.At)
	r := q.slab.at(slot)
	q.detach(r)
	q.drop(slot, r, c.At)
	return nil
}

// ApplyExtend sets the expiry of a lease to c.ExpiresAt, as computed by DecideExtend. A held
// message (see Hold) is leased instead, to c.Consumer from c.At until c.ExpiresAt, without
// counting an attempt. It fails with ErrMessageNotFound if the message is neither leased nor
// held.
func (q *Queue) ApplyExtend(c Extend) error {
	slot, r, err := q.claimed(c.ID)
	if err != nil {
		return err
	}
	if r.state() == stHeld {
		q.unlinkHeld(r)
		q.addLease(slot, r, c.At, c.ExpiresAt, c.Consumer)
		return nil
	}
	l := &q.leases[r.next]
	l.expiresAt = c.ExpiresAt
	q.leaseHeap.retime(l.pos, c.ExpiresAt)
	return nil
}

// ApplyFail fails a delivery (after promoting delayed messages due at c.At): the message leaves
// whatever set holds it — its lease on the node that delivered it; the ready FIFO, held list or
// delayed heap on a fast-durability queue's replica or replay, which never saw the lease — takes
// c.Attempts as its attempt count and c.Error as its LastError. With c.DeadLetter it is deleted;
// otherwise it waits until c.NotBefore (ready at once if that is at or before c.At) and then
// joins the end of its key's FIFO; the head of an ordering group stays the head, holding its
// group while it waits. It returns the message as it stands after the failure — for
// a dead-lettered one, its last state, from which DeadLetterCopy makes the DLQ message. It fails
// with ErrMessageNotFound only if the ID is not stored.
func (q *Queue) ApplyFail(c Fail) (Message, error) {
	slot, ok := q.index.find(c.ID, q.slab)
	if !ok {
		return Message{}, ErrMessageNotFound
	}
	q.advance(c.At)
	r := q.slab.at(slot)
	q.detach(r)
	r.attempts = c.Attempts
	q.setError(slot, r, c.Error)
	if c.DeadLetter {
		m := q.message(slot)
		m.State = StateUnknown
		q.drop(slot, r, c.At)
		return m, nil
	}
	r.notBefore = c.NotBefore
	q.place(slot, r, c.At)
	return q.message(slot), nil
}

// ApplyRemove deletes a stored message in any state (after promoting delayed messages due at
// c.At) and returns its last state (State StateUnknown, lease fields cleared). It fails with
// ErrMessageNotFound if the ID is not stored.
func (q *Queue) ApplyRemove(c Remove) (Message, error) {
	slot, ok := q.index.find(c.ID, q.slab)
	if !ok {
		return Message{}, ErrMessageNotFound
	}
	q.advance(c.At)
	r := q.slab.at(slot)
	m := DeadLetterCopy(q.message(slot))
	m.Queue = q.name
	q.detach(r)
	q.drop(slot, r, c.At)
	return m, nil
}

// ApplyUpdateConfig replaces the configuration but its Alloc, which stays the Queue's; it fails
// (changing nothing) if c.Config does not pass Validate.
func (q *Queue) ApplyUpdateConfig(c UpdateConfig) error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	q.cfg = c.Config
	q.cfg.Alloc = q.slab.mem
	return nil
}
