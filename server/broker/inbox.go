package broker

import "sync"

// An actor's work arrives in two queues: ops, the inbox of requests from connections (bounded:
// a full inbox answers ChannelFull), and internal, the operations other goroutines run on it
// (never refused). Each round takes every internal operation and then up to maxOpsPerRound
// requests (at least one).

// op is one operation run on the actor's goroutine.
type op func(a *actor)

// request is an operation from a connection waiting in the inbox: run on the actor, or answered
// by refuse with a code for every part of it: QueueNotFound when the actor stops first (the queue
// was deleted or the broker is closing), StorageError when a sleeping actor cannot wake while the
// store refuses writes.
type request struct {
	run    op
	refuse func(Code)
}

// submitted says what became of a request offered to the inbox.
type submitted uint8

const (
	accepted  submitted = iota // in the inbox: it will run or be answered gone
	inboxFull                  // refused: ChannelFull
	actorGone                  // refused: the actor has stopped (QueueNotFound)
)

// opQueue is an unbounded queue of operations with a wake-up signal.
type opQueue struct {
	mu   sync.Mutex
	ops  []op
	wake chan struct{}
}

func (q *opQueue) push(o op) {
	q.mu.Lock()
	q.ops = append(q.ops, o)
	q.mu.Unlock()
	signal(q.wake)
}

func (q *opQueue) take(dst []op) []op {
	q.mu.Lock()
	dst = append(dst, q.ops...)
	clear(q.ops)
	q.ops = q.ops[:0]
	q.mu.Unlock()
	return dst
}

// inbox holds the requests from connections waiting for the actor, at most max. It holds no
// buffer while empty, so an idle queue preallocates nothing for it.
type inbox struct {
	mu   sync.Mutex
	reqs []request
	max  int
	gone bool          // closed: the actor has stopped
	wake chan struct{} // signalled when requests arrive
}

// take appends the runs of up to n waiting requests to dst, oldest first; requests left behind
// re-arm the wake-up.
func (q *inbox) take(dst []op, n int) []op {
	q.mu.Lock()
	k := min(len(q.reqs), n)
	for _, r := range q.reqs[:k] {
		dst = append(dst, r.run)
	}
	left := copy(q.reqs, q.reqs[k:])
	clear(q.reqs[left:])
	q.reqs = q.reqs[:left]
	if left == 0 && cap(q.reqs) > 64 {
		q.reqs = nil // let a burst's buffer go
	}
	q.mu.Unlock()
	if left > 0 {
		signal(q.wake)
	}
	return dst
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// submit queues a request from a connection.
func (a *actor) submit(r request) submitted {
	q := &a.ops
	q.mu.Lock()
	switch {
	case q.gone:
		q.mu.Unlock()
		return actorGone
	case len(q.reqs) >= q.max:
		q.mu.Unlock()
		return inboxFull
	}
	q.reqs = append(q.reqs, r)
	q.mu.Unlock()
	signal(q.wake)
	a.poke()
	return accepted
}

// waiting reports whether requests wait.
func (q *inbox) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.reqs) > 0
}

// waiting reports whether operations wait.
func (q *opQueue) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ops) > 0
}

// closeInbox refuses every later request and answers, as gone, those still waiting.
func (a *actor) closeInbox() {
	q := &a.ops
	q.mu.Lock()
	q.gone = true
	q.mu.Unlock()
	q.refuseWaiting(CodeQueueNotFound)
}

// refuseWaiting answers every request waiting with code.
func (q *inbox) refuseWaiting(code Code) {
	q.mu.Lock()
	waiting := q.reqs
	q.reqs = nil
	q.mu.Unlock()
	for _, r := range waiting {
		r.refuse(code)
	}
}
