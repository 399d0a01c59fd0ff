package bus

import (
	"sync"
	"unsafe"

	"github.com/filamq/fila/server/membudget"
)

// queue is a subscription's FIFO of waiting messages: a ring that grows by doubling up to its
// bound as messages wait, and shrinks back once a burst has drained. An idle subscription holds
// no slots: a buffered channel of the bound (8,192 slots of 56 bytes) cost each one 448 KiB,
// most of it resident.
type queue struct {
	mu      sync.Mutex
	buf     []Message // len(buf) is the ring's size: 0 or a power of two
	head, n int
	max     int                // the bound on n
	acct    *membudget.Account // holds len(buf)'s slots (nil: no account)
	ready   chan struct{}      // holds a token once a message is pushed (see Subscription.Ready)
	closed  bool               // set by close: no more pushes
}

// slotBytes is what one slot of a queue's ring costs.
const slotBytes = int64(unsafe.Sizeof(Message{}))

// The sizes a ring takes: it starts at minSlots, and a ring of more than shrinkSlots shrinks back
// to minSlots when it empties (it was sized for a burst that is over).
const (
	minSlots    = 16
	shrinkSlots = 256
)

func newQueue(max int, acct *membudget.Account) *queue {
	return &queue{max: max, acct: acct, ready: make(chan struct{}, 1)}
}

// push appends m; false when the queue is at its bound, its ring cannot grow within the account,
// or it was closed.
func (q *queue) push(m Message) bool {
	q.mu.Lock()
	if q.closed || q.n == q.max || (q.n == len(q.buf) && !q.grow()) {
		q.mu.Unlock()
		return false
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = m
	q.n++
	q.mu.Unlock()
	q.signal()
	return true
}

// signal leaves a token in ready (one is enough: the receiver takes every message it announces).
func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// rearm signals when messages are waiting.
func (q *queue) rearm() {
	q.mu.Lock()
	n := q.n
	q.mu.Unlock()
	if n > 0 {
		q.signal()
	}
}

// grow doubles the ring (to at least minSlots); false when the account refuses the new slots.
func (q *queue) grow() bool {
	size := max(minSlots, 2*len(q.buf))
	if err := q.acct.Reserve(int64(size-len(q.buf)) * slotBytes); err != nil {
		return false
	}
	q.resize(size)
	return true
}

// resize moves the waiting messages to a ring of size slots (0: none; the account is adjusted by
// the caller for growth, here for shrinking).
func (q *queue) resize(size int) {
	var buf []Message
	if size > 0 {
		buf = make([]Message, size)
	}
	for i := range q.n {
		buf[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
	}
	if size < len(q.buf) {
		q.acct.Release(int64(len(q.buf)-size) * slotBytes)
	}
	q.buf, q.head = buf, 0
}

// pop takes the oldest message. The ring shrinks back to minSlots when it empties after a
// burst, and is freed when it empties after close.
func (q *queue) pop() (Message, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return Message{}, false
	}
	m := q.buf[q.head]
	q.buf[q.head] = Message{}
	q.head = (q.head + 1) & (len(q.buf) - 1)
	if q.n--; q.n == 0 {
		q.shrink()
	}
	return m, true
}

// close refuses later pushes; the waiting messages can still be popped.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.n == 0 {
		q.shrink()
	}
}

// shrink sizes an empty ring down: to nothing once closed, to minSlots after a burst.
func (q *queue) shrink() {
	switch {
	case q.closed && len(q.buf) > 0:
		q.resize(0)
	case len(q.buf) > shrinkSlots:
		q.resize(minSlots)
	}
}
