package broker

import (
	"bytes"
	"slices"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// The bodies a round's deliveries need that the body cache no longer holds — a standing
// backlog's oldest messages — are read from storage beside the round's commit, not on the actor's
// goroutine: deliver marks those deliveries (Delivery.unread), the round takes a consistent view
// of the store when it is proposed, and a goroutine reads them through it, in ID order with one
// iterator, while the entry commits. The waiter waits for the read before it hands the
// deliveries over. Because the view is taken before any later round exists, a body leased in
// this round is found however soon a later round acks or removes its message; one not found
// (damage, a failing disk) is logged and its delivery dropped, as when the read ran inline — the
// lease then runs out and the message is delivered again.

// bodyRead is one round's reading of its deliveries' bodies.
type bodyRead struct {
	done    chan struct{}
	err     error // set before done is closed
	missing int   // how many of the bodies were not found; set before done is closed
}

// unreadAt is a delivery whose body is to be read: outbox[batch].deliveries[at].
type unreadAt struct {
	id        engine.MsgID
	batch, at int
}

// bodySlab is how much payload one allocation of a round's read holds (bodies are copied out of
// storage into shared slabs rather than one allocation each).
const bodySlab = 64 << 10

// readBodies starts reading the bodies of outbox's deliveries marked unread; nil when none is.
func (a *actor) readBodies(outbox []outBatch) *bodyRead {
	if a.unread == 0 {
		return nil
	}
	want := make([]unreadAt, 0, a.unread) // the reading goroutine's own
	a.unread = 0
	for b := range outbox {
		for i := range outbox[b].deliveries {
			if d := &outbox[b].deliveries[i]; d.unread {
				want = append(want, unreadAt{id: engine.MsgID(d.ID), batch: b, at: i})
			}
		}
	}
	if len(want) == 0 {
		return nil // the round's deliveries were dropped (a reload)
	}
	byID := func(x, y unreadAt) int { return bytes.Compare(x.id[:], y.id[:]) }
	if !slices.IsSortedFunc(want, byID) { // one key's FIFO is in ID order already
		slices.SortFunc(want, byID)
	}
	ids := make([]storage.ID, len(want))
	for i, w := range want {
		ids[i] = w.id
	}
	read := a.b.db.ReadBodiesLater(a.name, ids)
	r := &bodyRead{done: make(chan struct{}), missing: len(want)}
	go func() {
		defer close(r.done)
		var slab []byte
		r.err = read(func(i int, h map[string]string, p []byte) {
			r.missing--
			w := want[i]
			d := &outbox[w.batch].deliveries[w.at]
			if cap(slab)-len(slab) < len(p) {
				slab = make([]byte, 0, max(bodySlab, len(p)))
			}
			n := len(slab)
			slab = append(slab, p...)
			d.Headers, d.Payload, d.unread = d.dead.headers(h), slab[n:len(slab):len(slab)], false
		})
	}()
	return r
}

// awaitBodies waits until c's bodies are read and drops the deliveries whose body was not found.
func (a *actor) awaitBodies(c *commit) {
	r := c.reads
	if r == nil {
		return
	}
	<-r.done
	c.reads = nil
	if r.err != nil {
		a.log.Error("reading message bodies failed", "err", r.err)
	}
	if r.missing == 0 {
		return
	}
	for b := range c.outbox {
		ds := c.outbox[b].deliveries
		kept := ds[:0]
		for _, d := range ds {
			if d.unread {
				a.log.Error("reading a message body failed", "id", d.ID, "err", storage.ErrNotFound)
				continue
			}
			kept = append(kept, d)
		}
		clear(ds[len(kept):])
		c.outbox[b].deliveries = kept
	}
}
