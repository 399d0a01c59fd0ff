package broker

import (
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
// while the total is over it, so a large backlog costs disk, not memory. Entries of the current
// round are never dropped before its commit (trim runs after it).
type bodyCache struct {
	max   int64
	total *atomic.Int64 // bytes cached by every queue
	m     map[engine.MsgID]*body
	order []engine.MsgID // insertion order; may hold IDs already removed
	head  int
}

func newBodyCache(maxBytes int, total *atomic.Int64) bodyCache {
	return bodyCache{max: int64(maxBytes), total: total, m: map[engine.MsgID]*body{}}
}

func (c *bodyCache) put(id engine.MsgID, b *body) {
	c.m[id] = b
	c.total.Add(int64(b.size()))
	c.order = append(c.order, id)
}

func (c *bodyCache) get(id engine.MsgID) (*body, bool) {
	b, ok := c.m[id]
	return b, ok
}

func (c *bodyCache) remove(id engine.MsgID) {
	if b, ok := c.m[id]; ok {
		c.total.Add(-int64(b.size()))
		delete(c.m, id)
	}
}

// clear forgets every body (the queue is deleted or reloading).
func (c *bodyCache) clear() {
	for id := range c.m {
		c.remove(id)
	}
	c.order, c.head = c.order[:0], 0
}

// trim drops this queue's oldest bodies while all caches together are over the budget.
func (c *bodyCache) trim() {
	for c.total.Load() > c.max && c.head < len(c.order) {
		c.remove(c.order[c.head])
		c.head++
	}
	if c.head > 4096 && c.head*2 > len(c.order) {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	if len(c.m) == 0 {
		c.order, c.head = c.order[:0], 0
	}
}

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
