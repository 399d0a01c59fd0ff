package broker

import (
	"bytes"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
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
// storage: the cache is bounded by bytes and drops the oldest entries first, so a large backlog
// costs disk, not memory. Entries of the current round are never dropped before its commit.
type bodyCache struct {
	max   int
	bytes int
	m     map[engine.MsgID]*body
	order []engine.MsgID // insertion order; may hold IDs already removed
	head  int
}

func newBodyCache(maxBytes int) bodyCache {
	return bodyCache{max: maxBytes, m: map[engine.MsgID]*body{}}
}

func (c *bodyCache) put(id engine.MsgID, b *body) {
	c.m[id] = b
	c.bytes += b.size()
	c.order = append(c.order, id)
}

func (c *bodyCache) get(id engine.MsgID) (*body, bool) {
	b, ok := c.m[id]
	return b, ok
}

func (c *bodyCache) remove(id engine.MsgID) {
	if b, ok := c.m[id]; ok {
		c.bytes -= b.size()
		delete(c.m, id)
	}
}

// trim drops the oldest bodies until the cache is within its budget.
func (c *bodyCache) trim() {
	for c.bytes > c.max && c.head < len(c.order) {
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
	var rec store.MessageRecord
	done, err := a.b.db.ReadMessage(a.name, storage.ID(id), &rec)
	if err != nil {
		return body{}, err
	}
	b := body{headers: rec.Headers, payload: bytes.Clone(rec.Payload)} // headers are Go strings: copies
	done()
	return b, nil
}
