package engine

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"slices"
)

// A snapshot of a Queue is what Messages, SnapshotKeys and ReadyOrder report; a Restorer turns
// it back into a Queue. Together with the commands applied after it, it is the whole replicated
// state (the log is the truth): restoring a snapshot of a queue and applying the same later
// commands gives the same messages, leases, DRR round, deficits and FIFOs, hence the same
// deliveries. Subscriptions and holds are live state and are in no snapshot. Every order a
// snapshot reports is canonical (enqueue order, round order, FIFO order, ties on time broken
// by message ID), so a restored queue, which stores its messages at other slots, behaves
// identically.

// KeySnapshot is one fairness key's scheduler state.
type KeySnapshot struct {
	Name    string
	Weight  uint32 // the key's weight (weight of its most recently enqueued message)
	Deficit uint64 // remaining DRR deficit of the current turn; 0 when not in the round
	InRound bool   // the key has ready messages and is in the DRR round
	Ready   int    // the IDs ReadyOrder yields for the key (its ready and held messages); AddKey ignores it
}

// SnapshotKeys iterates over every key that has stored messages: first the keys of the DRR round
// in round order (the head, which has the turn, first), then the others in name order. During a
// hold (see Hold) the round is reported as the release would leave it: keys that have only
// held messages follow the round, with no deficit, in the order of their oldest held message.
// The queue must not be changed during the iteration; it allocates O(keys).
func (q *Queue) SnapshotKeys() iter.Seq[KeySnapshot] {
	return func(yield func(KeySnapshot) bool) {
		snap := func(k uint32, inRound bool) KeySnapshot {
			ks := &q.keys[k]
			return KeySnapshot{Name: ks.name, Weight: ks.weight, Deficit: ks.deficit, InRound: inRound,
				Ready: int(ks.pending) + int(ks.held)}
		}
		k := q.active.head
		for range q.active.n {
			if !yield(snap(k, true)) {
				return
			}
			k = q.active.next[k]
		}
		joining, rest := q.keysOutOfRound()
		for _, k := range joining {
			if !yield(snap(k, true)) {
				return
			}
		}
		for _, k := range rest {
			if !yield(snap(k, false)) {
				return
			}
		}
	}
}

// keysOutOfRound returns the stored keys that are not in the DRR round: those with held
// messages, in the order the release will add them to the round, and the others by name.
func (q *Queue) keysOutOfRound() (joining, rest []uint32) {
	seen := 0
	for k := range q.keys {
		ks := &q.keys[k]
		switch {
		case ks.refs == 0 || q.active.contains(uint32(k)):
		case ks.held > 0:
			seen++
		default:
			rest = append(rest, uint32(k))
		}
	}
	slices.SortFunc(rest, func(a, b uint32) int { return cmp.Compare(q.keys[a].name, q.keys[b].name) })
	if seen == 0 {
		return nil, rest
	}
	added := make([]bool, len(q.keys))
	for slot := q.ohead; len(joining) < seen; slot = q.slab.at(slot).onext {
		r := q.slab.at(slot)
		if k := r.key(); r.state() == stHeld && !added[k] && !q.active.contains(k) {
			added[k] = true
			joining = append(joining, k)
		}
	}
	return joining, rest
}

// ReadyOrder iterates over the ready FIFO of key name, head first (empty for an unknown key).
// During a hold (see Hold) the key's held messages follow, in enqueue order, as the release
// will append them. The queue must not be changed during the iteration.
func (q *Queue) ReadyOrder(key string) iter.Seq[MsgID] {
	return func(yield func(MsgID) bool) {
		k, ok := q.keyIdx[key]
		if !ok {
			return
		}
		for _, slot := range [2]uint32{q.keys[k].head, q.keys[k].heldHead} {
			for ; slot != nilIdx; slot = q.slab.at(slot).next {
				if !yield(q.slab.at(slot).id) {
					return
				}
			}
		}
	}
}

// ErrInvalidSnapshot is wrapped by every error of a Restorer about the snapshot it is given.
var ErrInvalidSnapshot = errors.New("engine: invalid snapshot")

// errRestored is what a Restorer answers once it has returned its queue.
var errRestored = errors.New("engine: the Restorer has returned its queue")

// Restorer rebuilds a Queue from a snapshot, streamed: every message in enqueue order
// (AddMessage, from Messages), then every key (AddKey, in SnapshotKeys order) each followed by
// its ready FIFO (AddReady, from ReadyOrder), then Queue. It needs no memory beyond the queue
// it builds and O(keys). The first error sticks: every later call returns it.
//
// To restart from a snapshot, restore it and Apply every command logged after it.
type Restorer struct {
	q        *Queue
	err      error
	added    []bool // by key index: AddKey seen
	cur      uint32 // key whose FIFO AddReady fills; nilIdx before the first AddKey
	outside  bool   // a key not in the round has been added: no round key may follow
	unplaced int    // ready messages not yet in a FIFO
}

// NewRestorer starts restoring a queue named name with configuration cfg (the configuration in
// force at the snapshot), which must pass Validate.
func NewRestorer(name string, cfg Config) (*Restorer, error) {
	q, err := NewQueue(name, cfg)
	if err != nil {
		return nil, err
	}
	return &Restorer{q: q, cur: nilIdx}, nil
}

// fail records the first error of the restore.
func (r *Restorer) fail(format string, args ...any) error {
	r.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidSnapshot}, args...)...)
	return r.err
}

// AddMessage adds the next message in enqueue order, in the state m.State says: StateDelayed
// (waits for NotBefore), StateLeased (LeasedAt, LeaseExpiresAt, Consumer), StateReady (placed in
// its key's FIFO by AddReady). A grouped message that is not the first of its ordering group
// waits behind the group's head whatever its state (it must not be leased) and is in no FIFO. Every other field is taken as it is (an empty fairness key is
// DefaultFairnessKey, a zero weight 1); Headers, Payload and Attributes are kept if given. Queue is ignored.
func (r *Restorer) AddMessage(m Message) error {
	if r.err != nil {
		return r.err
	}
	q := r.q
	switch {
	case r.cur != nilIdx:
		return r.fail("message %v after the keys", m.ID)
	case uint64(q.slab.live) >= uint64(maxSlots):
		return r.fail("%w: %d messages", ErrQueueFull, q.slab.live)
	case len(q.keyIdx) >= maxKeys:
		return r.fail("%w: %d fairness keys", ErrQueueFull, len(q.keyIdx))
	case m.State != StateReady && m.State != StateDelayed && m.State != StateLeased && m.State != StateUnclassified:
		return r.fail("message %v has state %v", m.ID, m.State)
	case m.State == StateUnclassified && (!m.Unclassified || q.uncl.deliver):
		return r.fail("message %v is parked but not unclassified, or in a queue that does not park", m.ID)
	}
	if _, dup := q.index.find(m.ID, q.slab); dup {
		return r.fail("%w: %v", ErrDuplicateID, m.ID)
	}
	slot, rc := q.store(&m)
	if m.State == StateUnclassified {
		q.parkUnclassified(rc)
		return nil
	}
	if q.waits(slot, rc) {
		// Behind the head of its ordering group: it has no place of its own yet.
		if m.State == StateLeased {
			return r.fail("message %v is leased behind the head of its ordering group", m.ID)
		}
		rc.setState(stWaiting)
		return nil
	}
	switch m.State {
	case StateReady:
		rc.setState(stRestored)
		r.unplaced++
	case StateDelayed:
		rc.setState(stDelayed)
		q.nDelayed++
		q.delayed.push(rc.notBefore, slot)
	case StateLeased:
		q.addLease(slot, rc, m.LeasedAt, m.LeaseExpiresAt, m.Consumer)
	}
	return nil
}

// AddKey starts the next key (SnapshotKeys order: the round keys first, in round order; the
// others in any order); AddReady appends id to that key's FIFO.
func (r *Restorer) AddKey(k KeySnapshot) error {
	if r.err != nil {
		return r.err
	}
	q := r.q
	i, ok := q.keyIdx[k.Name]
	switch {
	case !ok:
		return r.fail("key %q has no stored message", k.Name)
	case int(i) < len(r.added) && r.added[i]:
		return r.fail("key %q given twice", k.Name)
	case k.Weight == 0:
		return r.fail("key %q has weight 0", k.Name)
	case k.InRound && r.outside:
		return r.fail("key %q of the round follows keys that are not in it", k.Name)
	case !k.InRound && k.Deficit != 0:
		return r.fail("key %q is not in the round but has deficit %d", k.Name, k.Deficit)
	}
	for len(r.added) <= int(i) {
		r.added = append(r.added, false)
	}
	r.added[i] = true
	ks := &q.keys[i]
	ks.weight, ks.deficit = k.Weight, k.Deficit
	if k.InRound {
		q.active.pushBack(i)
	} else {
		r.outside = true
	}
	r.cur = i
	return nil
}

// AddReady appends id to the FIFO of the key AddKey last started. id must be a ready message
// of that key, given once.
func (r *Restorer) AddReady(id MsgID) error {
	if r.err != nil {
		return r.err
	}
	q := r.q
	if r.cur == nilIdx {
		return r.fail("ready message %v before any key", id)
	}
	key := q.keys[r.cur].name
	slot, ok := q.index.find(id, q.slab)
	if !ok {
		return r.fail("message %v in the FIFO of key %q is not stored", id, key)
	}
	rc := q.slab.at(slot)
	switch st := rc.state(); {
	case st == stReady:
		return r.fail("message %v is in two ready FIFOs (again in key %q)", id, key)
	case st != stRestored:
		return r.fail("message %v in the FIFO of key %q is %s, not ready", id, key, stateText(st))
	case rc.key() != r.cur:
		return r.fail("message %v of key %q is in the FIFO of key %q", id, q.keys[rc.key()].name, key)
	}
	q.appendReady(slot, rc)
	r.unplaced--
	return nil
}

// Queue checks that the snapshot is complete and consistent — every ready message in exactly
// one FIFO, of its own key; every stored key given; the round keys, and only they, with ready
// messages — and returns the queue. Errors name what is wrong. Afterwards every method of the
// Restorer fails.
func (r *Restorer) Queue() (*Queue, error) {
	if r.err != nil {
		return nil, r.err
	}
	q := r.q
	if r.unplaced > 0 {
		for slot := q.ohead; slot != nilIdx; slot = q.slab.at(slot).onext {
			if rc := q.slab.at(slot); rc.state() == stRestored {
				return nil, r.fail("ready message %v (key %q) is in no FIFO", rc.id, q.keys[rc.key()].name)
			}
		}
	}
	for i := range q.keys {
		ks := &q.keys[i]
		switch inRound := q.active.contains(uint32(i)); {
		case ks.refs == 0:
		case i >= len(r.added) || !r.added[i]:
			return nil, r.fail("key %q is missing", ks.name)
		case inRound && ks.pending == 0:
			return nil, r.fail("key %q is in the round but has no ready message", ks.name)
		case !inRound && ks.pending > 0:
			return nil, r.fail("key %q has %d ready messages but is not in the round", ks.name, ks.pending)
		}
	}
	r.q, r.err = nil, errRestored
	return q, nil
}
