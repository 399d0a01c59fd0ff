package engine

import (
	"bytes"
	"iter"
)

// After iterates, in enqueue order, over the stored messages that follow id, for paging through
// a queue without changing it (the broker's Peek). When id is still stored they are the messages
// after it in enqueue order. When it has left the queue since (acknowledged, deleted), they are
// the stored messages whose IDs sort after it: IDs are time-ordered, so in a queue fed by
// producers that is where the previous page ended; in a dead-letter queue, stored in the order
// its messages died, a page may then repeat or skip some; finding where to start then steps over
// the stored messages before it (their IDs only). The queue must not be changed during the
// iteration.
func (q *Queue) After(id MsgID) iter.Seq[Message] {
	return func(yield func(Message) bool) {
		slot, found := q.index.find(id, q.slab)
		if found {
			slot = q.slab.at(slot).onext
		} else {
			slot = q.ohead
		}
		for ; slot != nilIdx; slot = q.slab.at(slot).onext {
			if r := q.slab.at(slot); !found && bytes.Compare(r.id[:], id[:]) <= 0 {
				continue
			}
			if !yield(q.message(slot)) {
				return
			}
		}
	}
}

// Newest returns the ID of the most recently stored message in enqueue order; ok is false when
// the queue is empty.
func (q *Queue) Newest() (id MsgID, ok bool) {
	if q.otail == nilIdx {
		return MsgID{}, false
	}
	return q.slab.at(q.otail).id, true
}
