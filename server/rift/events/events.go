// Package events publishes Rift's server events on rift.events.…: connections opened and closed,
// authentication failures, durable streams created and deleted at run time, and the Fila queue
// broker's queue created/deleted and message dead-lettered (Events implements broker.Events).
// Each payload is a small JSON object.
//
// Subjects:
//
//	rift.events.connection.opened   {"time","remote","identity"}
//	rift.events.connection.closed   {"time","remote","identity"}
//	rift.events.auth.failed         {"time","remote","reason"}
//	rift.events.stream.created      {"time","stream"}
//	rift.events.stream.deleted      {"time","stream"}
//	rift.events.queue.created       {"time","queue"}
//	rift.events.queue.deleted       {"time","queue"}
//	rift.events.queue.dead_lettered {"time","queue","message_id"}
//
// Publication never blocks: a subscriber too slow to keep up is cut off by the bus.
package events

import (
	"encoding/json"
	"time"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/rift/bus"
)

// Event subjects.
const (
	ConnectionOpened = "rift.events.connection.opened"
	ConnectionClosed = "rift.events.connection.closed"
	AuthFailed       = "rift.events.auth.failed"
	StreamCreated    = "rift.events.stream.created"
	StreamDeleted    = "rift.events.stream.deleted"
	QueueCreated     = "rift.events.queue.created"
	QueueDeleted     = "rift.events.queue.deleted"
	DeadLettered     = "rift.events.queue.dead_lettered"
)

// Events publishes server events on a bus. A nil *Events drops them. It is safe for concurrent
// use.
type Events struct {
	bus   *bus.Bus
	clock func() time.Time
}

// New returns an Events publishing on b (nil: events are dropped).
func New(b *bus.Bus) *Events { return &Events{bus: b, clock: time.Now} }

// Event is the JSON payload of every event; fields that do not apply are omitted.
type Event struct {
	Time      time.Time `json:"time"`
	Remote    string    `json:"remote,omitempty"`
	Identity  string    `json:"identity,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Queue     string    `json:"queue,omitempty"`
	Stream    string    `json:"stream,omitempty"`
	MessageID string    `json:"message_id,omitempty"`
}

func (e *Events) publish(subj string, ev Event) {
	if e == nil || e.bus == nil {
		return
	}
	ev.Time = e.clock().UTC()
	body, _ := json.Marshal(ev)
	e.bus.Publish(subj, "", body)
}

// Opened reports an authenticated connection.
func (e *Events) Opened(remote, identity string) {
	e.publish(ConnectionOpened, Event{Remote: remote, Identity: identity})
}

// Closed reports the end of an authenticated connection.
func (e *Events) Closed(remote, identity string) {
	e.publish(ConnectionClosed, Event{Remote: remote, Identity: identity})
}

// AuthFailure reports a refused authentication.
func (e *Events) AuthFailure(remote, reason string) {
	e.publish(AuthFailed, Event{Remote: remote, Reason: reason})
}

// StreamCreated reports a durable stream created at run time.
func (e *Events) StreamCreated(stream string) { e.publish(StreamCreated, Event{Stream: stream}) }

// StreamDeleted reports a durable stream deleted at run time.
func (e *Events) StreamDeleted(stream string) { e.publish(StreamDeleted, Event{Stream: stream}) }

// QueueCreated implements broker.Events.
func (e *Events) QueueCreated(queue string) { e.publish(QueueCreated, Event{Queue: queue}) }

// QueueDeleted implements broker.Events.
func (e *Events) QueueDeleted(queue string) { e.publish(QueueDeleted, Event{Queue: queue}) }

// DeadLettered implements broker.Events.
func (e *Events) DeadLettered(queue string, id engine.MsgID) {
	e.publish(DeadLettered, Event{Queue: queue, MessageID: id.String()})
}
