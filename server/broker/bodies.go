package broker

import (
	"bytes"
	"slices"
	"sync/atomic"

	"github.com/filamq/fila/server/engine"
)

// body is a message's headers and payload.
type body struct {
	headers map[string]string
	payload []byte
}

func (b *body) size() int {
	n := len(b.payload) + 64
	for k, v := range b.headers {
		n += len(k) + len(v) + 32
	}
	return n
}

// bodyCache keeps the bodies of recently enqueued messages in memory so that the common case —
// delivered soon after it was enqueued — needs no storage read. Older bodies live only in
// storage: the caches of all queues share one byte budget, and each drops its oldest entries
// while the total is over it, so a large backlog costs disk, not memory. A body is never dropped
// before the log entry that stores it has been applied (its body written to storage): trim stops
// at the applied mark, which the waiter advances as entries are applied.
//
// IDs are made in increasing order (ids.go), so the cache's IDs are ascending in insertion order
// and an ID below the oldest one still in order cannot be cached: the consumers of a backlog ask
// for such old IDs at every delivery and ack, and are answered without a map lookup. A put out of
// order turns that off until the cache is cleared.
type bodyCache struct {
	max       int64
	total     *atomic.Int64 // bytes cached by every queue
	m         map[engine.MsgID]*body
	order     []engine.MsgID // insertion order; may hold IDs already removed
	head      int
	base      int64        // entries dropped from the front of order so far (positions are base + index)
	mark      atomic.Int64 // positions below it belong to applied entries
	unordered bool         // an ID was put below the one before it
	slack     int          // removed IDs the order may keep beyond twice the bodies held
	bytes     int64        // bytes cached by this queue
}

func newBodyCache(maxBytes int, total *atomic.Int64) *bodyCache {
	return &bodyCache{max: int64(maxBytes), total: total, m: map[engine.MsgID]*body{}, slack: sparseSlack}
}

func (c *bodyCache) put(id engine.MsgID, b *body) {
	if n := len(c.order); n > c.head && bytes.Compare(id[:], c.order[n-1][:]) <= 0 {
		c.unordered = true
	}
	c.m[id] = b
	c.bytes += int64(b.size())
	c.total.Add(int64(b.size()))
	c.order = append(c.order, id)
}

// older reports whether id is below every ID the cache can hold.
func (c *bodyCache) older(id engine.MsgID) bool {
	return !c.unordered && (c.head == len(c.order) || bytes.Compare(id[:], c.order[c.head][:]) < 0)
}

func (c *bodyCache) get(id engine.MsgID) (*body, bool) {
	if c.older(id) {
		return nil, false
	}
	b, ok := c.m[id]
	return b, ok
}

func (c *bodyCache) remove(id engine.MsgID) {
	if c.older(id) {
		return
	}
	if b, ok := c.m[id]; ok {
		c.bytes -= int64(b.size())
		c.total.Add(-int64(b.size()))
		delete(c.m, id)
	}
}

// end is the position after the newest body: a round's entry covers every body below it.
func (c *bodyCache) end() int64 { return c.base + int64(len(c.order)) }

// applied records that the bodies below position end are in storage. It may be called from any
// goroutine.
func (c *bodyCache) applied(end int64) {
	for {
		cur := c.mark.Load()
		if end <= cur || c.mark.CompareAndSwap(cur, end) {
			return
		}
	}
}

// clear forgets every body (the queue is deleted or reloading).
func (c *bodyCache) clear() {
	for id := range c.m {
		c.remove(id)
	}
	c.base += int64(len(c.order))
	c.order, c.head, c.unordered = c.order[:0], 0, false
	c.applied(c.base)
}

// trim drops this queue's oldest bodies already in storage while all caches together are over
// the budget, and steps over the IDs at the front of the insertion order whose bodies were
// removed already (acked), so that the order holds about what the cache holds: a queue whose
// messages are acked as fast as they come never fills the budget, and its order would otherwise
// grow by an ID per message for as long as the queue lives. When removed IDs behind an old body
// that stays (a delayed or unacked message) outnumber the bodies held, that body is dropped too:
// it is in storage, and a later delivery reads it from there.
//
// stored is how many messages the queue holds (its dead-letter queue aside). When the budget could not hold that many bodies
// (of the average size of those cached), the queue has a backlog deeper than the cache: a body
// enqueued now waits behind more bodies than the cache keeps, and would be trimmed before it is
// delivered. Such a queue keeps only the bodies whose entries are not applied yet (a delivery
// made meanwhile still finds them), so that a backlog's fill and the enqueues behind it do not
// keep the budget's worth of enqueue buffers alive for nothing.
func (c *bodyCache) trim(stored int) {
	mark := c.mark.Load()
	deep := len(c.m) > 0 && int64(stored)*c.bytes/int64(len(c.m)) > c.max
	for c.head < len(c.order) && c.base+int64(c.head) < mark {
		id := c.order[c.head]
		if _, held := c.m[id]; held && !deep && c.total.Load() <= c.max && !c.sparse() {
			break
		}
		c.remove(id)
		c.head++
	}
	if c.head > c.slack && c.head*2 > len(c.order) {
		rest := c.order[c.head:]
		if cap(c.order) > 4*len(rest)+c.slack {
			c.order = slices.Clone(rest) // a backing array left from a larger cache goes
		} else {
			c.order = append(c.order[:0], rest...)
		}
		c.base += int64(c.head)
		c.head = 0
	}
}

// sparse reports whether the order holds many more IDs than the cache holds bodies.
func (c *bodyCache) sparse() bool { return len(c.order)-c.head > 2*len(c.m)+c.slack }

// sparseSlack is the cache's slack.
const sparseSlack = 4096

// loadBody returns a message's body from the cache or, copied out, from storage.
func (a *actor) loadBody(id engine.MsgID) (body, error) {
	if cached, ok := a.bodies.get(id); ok {
		return *cached, nil
	}
	b, err := a.b.db.ReadBody(a.name, id)
	if err != nil {
		return body{}, err
	}
	return body{headers: b.Headers, payload: b.Payload}, nil
}
