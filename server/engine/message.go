package engine

import (
	"encoding/hex"
	"fmt"
)

// MsgID is a message ID: a UUIDv7 assigned by the broker at enqueue. The engine treats it as an
// opaque 16-byte value; IDs are unique within a Queue.
type MsgID [16]byte

// String formats id in the canonical 8-4-4-4-12 hexadecimal UUID form.
func (id MsgID) String() string {
	var s [36]byte
	hex.Encode(s[0:8], id[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], id[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], id[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], id[8:10])
	s[23] = '-'
	hex.Encode(s[24:], id[10:])
	return string(s[:])
}

// DefaultFairnessKey is the fairness key of a message enqueued without one.
const DefaultFairnessKey = "default"

// State is where a stored message is in its lifecycle.
type State uint8

const (
	// StateUnknown is the zero value: not a stored message (e.g. a Message built by the broker
	// for Enqueue, or one returned after it left the queue).
	StateUnknown State = 0
	// StateReady messages are pending: deliverable as soon as the scheduler reaches them (or,
	// held by Queue.Hold, once the hold ends; or, behind the head of their ordering group, once
	// they are the head).
	StateReady State = 1
	// StateDelayed messages wait for their NotBefore time (an enqueue delay or a retry delay).
	StateDelayed State = 2
	// StateLeased messages are in flight: delivered and awaiting Ack, Nack or lease expiry.
	StateLeased State = 3
	// StateUnclassified messages are parked: stored after their on_enqueue failed, never
	// delivered until classified (see Classify).
	StateUnclassified State = 4
)

var stateNames = [...]string{"unknown", "ready", "delayed", "leased", "unclassified"}

// String returns the state's name; unknown values print as "State(n)".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Message is a message as it enters (Enqueue, Restorer.AddMessage) and leaves (Get, Oldest,
// Messages, ApplyFail, ApplyRemove) the engine. The engine stores it in a compact form and rebuilds this struct on
// demand, so a Message returned by the engine is a copy; Headers, Payload and Attributes are
// shared with the engine and must not be modified.
type Message struct {
	// ID is the broker-assigned message ID.
	ID MsgID
	// Queue is the name of the queue that returned the message. Output only: Enqueue ignores it.
	Queue string
	// Headers are opaque to the engine; nil is fine. The engine keeps the map it is given.
	Headers map[string]string
	// Payload is opaque to the engine; the broker may leave it nil and keep payloads on disk.
	// The engine keeps the slice it is given.
	Payload []byte
	// Attributes are what the queue's on_enqueue hook returned for the message (keys of kind
	// attribute read them: ordering, deduplication, throttles); nil when it has none. Opaque to
	// the engine, which keeps the map it is given.
	Attributes map[string]string
	// Group is the message's ordering group when Grouped: the broker decides it at enqueue
	// (ordering.md) — the encoded value of the queue's ordering key, or "" for a queue that is
	// one group. Within a group only the oldest stored message is ever delivered, delayed or
	// leased; the others wait behind it (see ordering.go). Redrive and dead-lettering keep it.
	Group string
	// Grouped puts the message in the ordering group Group; false for an unordered message.
	Grouped bool
	// FairnessKey selects the DRR flow; "" means DefaultFairnessKey.
	FairnessKey string
	// Weight is the message's DRR weight; 0 means 1. A key's weight is the weight of its most
	// recently enqueued message.
	Weight uint32
	// EnqueuedAt is the broker's acceptance time (Unix ms); 0 means the Enqueue command's At.
	EnqueuedAt int64
	// NotBefore is the earliest delivery time (Unix ms). A message whose NotBefore is at or
	// before the Enqueue's At is ready at once; later ones wait (StateDelayed). A retry sets it
	// to the retry time; redrive keeps it.
	NotBefore int64
	// Attempts is the number of deliveries so far (attempt_count): the first delivery makes it 1.
	Attempts uint32
	// RedriveCount counts redrives from the dead-letter queue.
	RedriveCount uint32
	// LastError is the error text of the most recent failure ("" if none).
	LastError string
	// State is the message's lifecycle state. Enqueue ignores it; a Restorer restores it.
	State State
	// LeasedAt is the start of the current lease (Unix ms); 0 unless State is StateLeased.
	// Enqueue ignores it, as it does the other lease fields; a Restorer restores them.
	LeasedAt int64
	// LeaseExpiresAt is the end of the current lease (Unix ms); 0 unless leased.
	LeaseExpiresAt int64
	// Consumer is the subscription holding the current lease; "" unless leased.
	Consumer string
	// Unclassified reports a message whose on_enqueue failed and that was never classified since:
	// parked in a queue (StateUnclassified), or kept so in a dead-letter queue. Enqueue parks an
	// unclassified message (unless the queue delivers them, see DeliverUnclassified).
	Unclassified bool
	// ClassifyTries counts the failed classification tries of an unclassified message.
	ClassifyTries uint32
}

// DeadLetterCopy returns the message to enqueue into the dead-letter queue for m, the Message
// returned by ApplyFail with DeadLetter set: it keeps ID, headers, payload, attributes, fairness
// key, weight, enqueue and not-before times, attempt count, redrive count and last error, and drops the
// lease and state. (The dead-letter reason is a broker concern.)
func DeadLetterCopy(m Message) Message {
	m.Queue = ""
	m.State = StateUnknown
	m.LeasedAt, m.LeaseExpiresAt, m.Consumer = 0, 0, ""
	return m
}

// RedriveCopy returns the message to enqueue into the parent queue when m is redriven out of a
// dead-letter queue (after an ApplyRemove there): same ID and body, attempt count reset to 0,
// RedriveCount + 1 (saturating), NotBefore kept — a passed one means deliverable at once.
func RedriveCopy(m Message) Message {
	m = DeadLetterCopy(m)
	m.Attempts = 0
	if m.RedriveCount < ^uint32(0) {
		m.RedriveCount++
	}
	return m
}
