package broker

import (
	"bytes"
	"slices"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/storage"
)

// Looking without touching, and cleaning up (docs/admin-api.md). Peek and Message read stored
// messages where they are: no lease, no attempt counted, nothing logged. DeleteMessage and Purge
// remove messages through the queue's log with Ack commands, as an acknowledgement does, so that
// a restart or a replica removes the same ones; they remove messages in every state, leased ones
// included (the consumer's later Ack of one is answered MessageNotFound).

// Peek bounds.
const (
	// DefaultPeekCount is how many messages a Peek returns when not told.
	DefaultPeekCount = 10
	// MaxPeekCount is the most messages one Peek returns.
	MaxPeekCount = 1000
	// MaxPeekBytes bounds the payloads of one page: a page ends before the message that would take
	// it past this (its first message is always whole, whatever its size).
	MaxPeekBytes = 4 << 20
	// purgeBatch is how many messages one round of a Purge removes (one Ack command of 16-byte IDs).
	purgeBatch = 4096
)

// StoredMessage is a stored message as Peek and Message show it.
type StoredMessage struct {
	ID          engine.MsgID
	Queue       string
	Headers     map[string]string
	Payload     []byte
	BodyMissing bool // the body was not found in storage (damage, or the message left meanwhile)
	FairnessKey string
	Weight      uint32
	// Group is the ordering group when Grouped.
	Group   string
	Grouped bool
	// State is ready, delayed, leased or unclassified (engine.State's names).
	State        string
	Attempts     uint32
	RedriveCount uint32
	LastError    string // the text of the last failure (for a dead-lettered message, the one that killed it)
	EnqueuedAt   int64  // Unix ms
	NotBefore    int64  // Unix ms
	// The lease, when State is leased.
	LeasedAt, LeaseExpiresAt int64
	Consumer                 string
	ClassifyTries            uint32 // failed on_enqueue tries of an unclassified message
}

// PeekPage is one page of a Peek.
type PeekPage struct {
	Messages []StoredMessage
	// More: messages follow the page's last one; ask again with After set to its ID.
	More bool
}

// Peek returns up to count (DefaultPeekCount when 0, at most MaxPeekCount) of queue's stored
// messages in enqueue order, oldest first, with their bodies, from the first one or (after not
// nil) from the message after *after (see engine.Queue.After). It changes nothing.
func (b *Broker) Peek(queue string, after *engine.MsgID, count int) (PeekPage, *Error) {
	switch {
	case count < 0 || count > MaxPeekCount:
		return PeekPage{}, errorf(CodeInvalidConfigValue, "count %d is not in 1..%d", count, MaxPeekCount)
	case count == 0:
		count = DefaultPeekCount
	}
	var page PeekPage
	var read func() []bool
	e := b.onQueue(queue, func(a *actor, l queuegroup.Lane) {
		q := a.st.Lane(l)
		msgs := q.Messages()
		if after != nil {
			msgs = q.After(*after)
		}
		for m := range msgs {
			if len(page.Messages) == count {
				page.More = true
				break
			}
			page.Messages = append(page.Messages, stored(m))
		}
		read = a.bodiesOf(l, page.Messages)
	})
	if e != nil {
		return PeekPage{}, e
	}
	cut := read()
	total := 0
	for i := range page.Messages {
		total += len(page.Messages[i].Payload)
		if i > 0 && (cut[i] || total > MaxPeekBytes) {
			page.Messages, page.More = page.Messages[:i], true
			break
		}
	}
	return page, nil
}

// Message returns the stored message id of queue with its body.
func (b *Broker) Message(queue string, id engine.MsgID) (StoredMessage, *Error) {
	var msgs []StoredMessage
	var read func() []bool
	e := b.onQueue(queue, func(a *actor, l queuegroup.Lane) {
		if m, ok := a.st.Lane(l).Get(id); ok {
			msgs = []StoredMessage{stored(m)}
			read = a.bodiesOf(l, msgs)
		}
	})
	switch {
	case e != nil:
		return StoredMessage{}, e
	case msgs == nil:
		return StoredMessage{}, errorf(CodeMessageNotFound, "queue %q has no message %s", queue, id)
	}
	read()
	return msgs[0], nil
}

// DeleteMessage removes the stored message id of queue for good, in whatever state it is, and
// returns once the removal is durable.
func (b *Broker) DeleteMessage(queue string, id engine.MsgID) *Error {
	return b.removing(queue, func(a *actor, l queuegroup.Lane) (*Error, bool) {
		if _, ok := a.st.Lane(l).Get(id); !ok {
			return errorf(CodeMessageNotFound, "queue %q has no message %s", queue, id), true
		}
		return a.remove(l, []engine.MsgID{id}), true
	})
}

// Purge removes the messages stored in queue when it begins, in every state, oldest first,
// purgeBatch per round, and returns how many it removed once their removal is durable. Messages
// enqueued while it runs may be removed too (it stops when it reaches the newest message stored
// when it began, or has removed as many as there were).
func (b *Broker) Purge(queue string) (uint64, *Error) {
	var removed uint64
	var last engine.MsgID
	left := -1 // messages stored at the start still to remove; -1 until the first round
	e := b.removing(queue, func(a *actor, l queuegroup.Lane) (*Error, bool) {
		q := a.st.Lane(l)
		if left < 0 {
			left = q.Len()
			last, _ = q.Newest()
		}
		ids := make([]engine.MsgID, 0, min(left, purgeBatch))
		reached := false
		for m := range q.Messages() {
			if len(ids) == cap(ids) || reached {
				break
			}
			ids = append(ids, m.ID)
			reached = m.ID == last
		}
		if e := a.remove(l, ids); e != nil {
			return e, true
		}
		removed += uint64(len(ids))
		left -= len(ids)
		return nil, reached || left <= 0 || len(ids) == 0
	})
	return removed, e
}

// onQueue runs f on the actor of queue's group with queue's lane.
func (b *Broker) onQueue(queue string, f func(a *actor, l queuegroup.Lane)) *Error {
	r := b.lookup(queue)
	if r.a == nil {
		return errorf(CodeQueueNotFound, "queue %q does not exist", queue)
	}
	if !r.a.call(func(a *actor) { f(a, r.lane) }) {
		return errorf(CodeQueueNotFound, "queue %q was deleted", queue)
	}
	return nil
}

// removing runs step on queue's actor in rounds, each answered once durable, until step says it
// is done or fails.
func (b *Broker) removing(queue string, step func(a *actor, l queuegroup.Lane) (*Error, bool)) *Error {
	r := b.lookup(queue)
	if r.a == nil {
		return errorf(CodeQueueNotFound, "queue %q does not exist", queue)
	}
	for done := false; !done; {
		e, ok := r.a.commitCall(func(a *actor) *Error {
			var e *Error
			e, done = step(a, r.lane)
			return e
		})
		switch {
		case !ok:
			return errorf(CodeQueueNotFound, "queue %q was deleted", queue)
		case e != nil:
			return e
		}
	}
	return nil
}

// remove logs the removal of ids, stored messages of lane l, as an acknowledgement of each.
func (a *actor) remove(l queuegroup.Lane, ids []engine.MsgID) *Error {
	now := a.now()
	for _, id := range ids {
		if err := a.st.Ack(l, id, now); err != nil {
			return errorf(CodeInternalError, "removing %s: %v", id, err)
		}
		a.bodies.remove(id)
	}
	return nil
}

// stored is m as a StoredMessage, without its body.
func stored(m engine.Message) StoredMessage {
	return StoredMessage{ID: m.ID, Queue: m.Queue, FairnessKey: m.FairnessKey, Weight: m.Weight,
		Group: m.Group, Grouped: m.Grouped, State: m.State.String(), Attempts: m.Attempts,
		RedriveCount: m.RedriveCount, LastError: m.LastError, EnqueuedAt: m.EnqueuedAt, NotBefore: m.NotBefore,
		LeasedAt: m.LeasedAt, LeaseExpiresAt: m.LeaseExpiresAt, Consumer: m.Consumer, ClassifyTries: m.ClassifyTries}
}

// bodiesOf fills in, on the actor, the bodies of msgs the body cache holds and takes a view of
// the store for the others; the returned read, called off the actor, reads those from it. Their
// payloads are copied while they fit in MaxPeekBytes (the first message's always); read reports
// which were cut for want of room, and marks the ones not found. Messages of the dead-letter lane
// get the dead-letter headers (deadletter.go).
func (a *actor) bodiesOf(l queuegroup.Lane, msgs []StoredMessage) (read func() []bool) {
	var want []int // indexes into msgs, in ID order
	dead := make([]*deadLetterNote, len(msgs))
	for i := range msgs {
		dead[i] = a.deadLetterNoteOf(l, msgs[i].ID)
		if c, ok := a.bodies.get(msgs[i].ID); ok {
			msgs[i].Headers, msgs[i].Payload = dead[i].headers(c.headers), c.payload
			continue
		}
		want = append(want, i)
	}
	slices.SortFunc(want, func(x, y int) int { return bytes.Compare(msgs[x].ID[:], msgs[y].ID[:]) })
	ids := make([]storage.ID, len(want))
	for j, i := range want {
		ids[j] = msgs[i].ID
	}
	later := a.b.db.ReadBodiesLater(a.name, ids)
	log := a.log
	return func() []bool {
		cut := make([]bool, len(msgs))
		found := make([]bool, len(msgs))
		room := MaxPeekBytes
		err := later(func(j int, h map[string]string, p []byte) {
			i := want[j]
			found[i] = true
			msgs[i].Headers = dead[i].headers(h)
			if i > 0 && len(p) > room {
				cut[i] = true
				return
			}
			room -= len(p)
			msgs[i].Payload = bytes.Clone(p)
		})
		if err != nil {
			log.Error("reading message bodies for a peek failed", "err", err)
		}
		for _, i := range want {
			msgs[i].BodyMissing = !found[i]
		}
		return cut
	}
}
