package transport

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/session"
)

// Admin requests run beside the reader.
//
// In a cluster an admin change waits for the meta group to commit it, and a CreateQueue for its
// queue group to open and elect a leader here too: about half a second, nearly all of it the
// election. Run on the reader, one at a time, a client that pipelines a thousand CreateQueues on
// one connection waited ten minutes, and no Ping was answered on the connection while a change
// waited (a client with a short pong timeout dropped it). So the reader checks the request's
// permission (it alone reads c.who) and hands it to a goroutine of its own, up to the
// connection's MaxInflight at once; each answer comes back when it completes, correlated by
// request ID as every answer is.
//
// The connection's order holds for everything but Ping and Pong, which never wait:
//   - CreateQueues run concurrently with one another (the meta group still commits them one after
//     the other: broker.CreateQueue); two of one name: one is answered QueueAlreadyExists, as
//     before, though not necessarily the later one;
//   - any other admin request waits until every admin request before it is answered, then runs
//     beside the reader, and a CreateQueue waits for such a request before it;
//   - every other request (an Enqueue to a queue just created, a Consume of it) waits until every
//     admin request before it is answered, as it did when the reader ran them.

// adminAside runs an admin request beside the reader once what must come before it is answered
// (handle has waited for the other admin requests already unless it is a CreateQueue).
func (c *conn) adminAside(h fibp.Header, body []byte, handler session.AdminHandler) {
	create := h.Opcode == fibp.OpCreateQueue
	if create {
		c.admins.Wait() // a DeleteQueue, an UpdateQueue... before it
	}
	if !c.permitAdmin(h, body) {
		return
	}
	if !c.begin(0) {
		return
	}
	body = append([]byte(nil), body...) // the reader reuses its buffer
	who, node := c.who, session.Node{ID: c.s.opts.NodeID, Addr: c.s.advertised()}
	wg := &c.admins
	if create {
		wg = &c.creates
	}
	wg.Add(1)
	go func() {
		defer c.end()
		defer wg.Done()
		c.runAdmin(h, body, handler, who, node)
	}()
}

// runAdmin runs an admin request and answers it.
func (c *conn) runAdmin(h fibp.Header, body []byte, handler session.AdminHandler, who *auth.Principal, node session.Node) {
	if c.adminShards(h, body, handler, who, node) { // shardadmin.go
		return
	}
	if c.adminElsewhere(h, body, handler, who, node) { // forwardadmin.go
		return
	}
	res, e, err := handler(c.s.svc, node, body)
	if list, ok := res.(*fibp.ListQueuesResult); ok {
		list.Queues = mergeShardRows(list.Queues)
	}
	c.answerAdmin(h, who, res, e, err)
}
