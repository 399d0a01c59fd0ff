package transport

import (
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/session"
)

// A Consume's Subscribe runs beside the reader.
//
// Subscribing to a sleeping queue wakes its group first; in a cluster that is about an election
// (half a second). Run on the reader, a consumer that subscribes to a hundred sleeping queues on
// one connection waited for a hundred wakes in a row, and no other request of the connection —
// its acks included — was read meanwhile. The checks that answer a Consume at once (permission,
// request ID, the subscription bound, memory) still run on the reader, which then records the
// subscription under its request ID and goes on; the Subscribe answers ConsumeOk or the error
// itself when it returns. Up to MaxInflight run at once (begin).
//
// Only what names the subscription waits for its Subscribe: a Credit or CancelConsume for it, a
// Consume that reuses its request ID, and the connection's end or a change of its key, which end
// every subscription. Acks, Nacks and ExtendLeases wait for every Subscribe running: a lease is
// the connection's subscription's (after a failover, an ExtendLease reclaims a message for the
// subscription its consumer has just made again on the new leader). A Subscribe that failed gave its memory back; the reader forgets its
// record when it next meets it.

// subscribeAside records the subscription id of queue and runs its Subscribe beside the reader.
// The subscription's memory is reserved.
func (c *conn) subscribeAside(id uint32, queue string, sr service.SubscribeRequest) {
	ref := &subRef{id: id, queue: queue, ready: make(chan struct{})}
	c.subs[id] = ref
	if !c.begin(subscriptionMemory) {
		delete(c.subs, id)
		close(ref.ready)
		return
	}
	c.consumes.Add(1)
	go func() {
		defer c.end()
		defer c.consumes.Done()
		sub, e := c.s.svc.Subscribe(sr, c.sink(id, ref))
		if e != nil {
			c.acct.Release(subscriptionMemory)
			c.sendServiceError(id, e)
		}
		ref.sub = sub
		close(ref.ready)
	}()
}

// sub returns the subscription id names once its Subscribe returned, or nil when there is none
// (or it failed, and is forgotten now).
func (c *conn) sub(id uint32) *subRef {
	ref, ok := c.subs[id]
	if !ok {
		return nil
	}
	if !ref.subscribed() {
		delete(c.subs, id)
		return nil
	}
	return ref
}

// forgetFailed forgets the subscriptions whose Subscribe failed (waiting for those running) and
// returns how many remain.
func (c *conn) forgetFailed() int {
	for id := range c.subs {
		c.sub(id)
	}
	return len(c.subs)
}

// sink is where subscription id's deliveries go: this connection, and its end to the reader.
func (c *conn) sink(id uint32, ref *subRef) session.Sink {
	return session.Sink{Out: c, RequestID: id, OnEnd: func() { c.subscriptionEnded(ref) }}
}
