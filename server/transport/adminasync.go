package transport

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/session"
)

// CreateQueue requests run beside the reader, up to the connection's MaxInflight at once.
//
// In a cluster a CreateQueue waits for the meta group to commit the queue and for its queue
// group to open and elect a leader here: about half a second, nearly all of it the election.
// Run on the reader, one at a time, a client that pipelines a thousand of them on one connection
// waited ten minutes. They run concurrently instead (the meta group still commits them one after
// the other: broker.CreateQueue), and their results come back as each completes, correlated by
// request ID as every result is.
//
// Nothing else overtakes them: any other request read after a CreateQueue waits until every
// CreateQueue before it has been answered, as it did when the reader ran them, so a client that
// pipelines a CreateQueue and then an Enqueue to the new queue, or an UpdateQueue of it, sees the
// queue exist. Only CreateQueues among themselves may complete out of order (two of one name:
// one is answered QueueAlreadyExists, as before, though not necessarily the later one). Ping and
// Pong never wait, so keepalive runs through a long batch of creations.

// createQueue checks a CreateQueue's permission on the reader (which alone reads c.who), then
// runs it on its own goroutine.
func (c *conn) createQueue(h fibp.Header, body []byte) {
	handler, _ := session.Admin(fibp.OpCreateQueue)
	if !c.permitAdmin(h, body) {
		return
	}
	if !c.begin(0) {
		return
	}
	body = append([]byte(nil), body...) // the reader reuses its buffer
	who, node := c.who, session.Node{ID: c.s.opts.NodeID, Addr: c.s.advertised()}
	c.creates.Add(1)
	go func() {
		defer c.end()
		defer c.creates.Done()
		res, e, err := handler(c.s.svc, node, body)
		c.answerAdmin(h, who, res, e, err)
	}()
}
