package engine

// Command is one deterministic state change of a Queue. The broker persists (and, in a cluster,
// replicates) commands and applies them with Queue.Apply or the typed Apply* methods; applying
// the same sequence to a fresh Queue reproduces the same state. Every decision that depends on
// policy, scripts or the wall clock is taken before the command is made (Dispatch, DecideFailure,
// DecideExtend), so applying a command never re-decides anything.
//
// Commands that touch the ready set carry a time (Enqueue.At, Lease.LeasedAt, Ack.At, Fail.At,
// Remove.At). Before applying one, the queue promotes every delayed message whose NotBefore is
// at or before that time, exactly as Dispatch and Advance do for the live queue, so promotions
// need no command of their own. The times given to one Queue must be non-decreasing (one
// broker clock) for a replay to reproduce the live delivery order exactly. (Extend.At is only
// the start of a lease it creates; Extend promotes nothing.)
//
// With fast delivery durability the broker does not persist Lease commands, but does persist
// Ack and Fail: a replica or replay applies them to a message it holds as ready or delayed,
// and Fail carries the attempt count, so it counts the same.
//
// Command is sealed: only the types of this package implement it.
type Command interface {
	command()
}

// Enqueue stores new messages, in order. It is all-or-nothing: if any message's ID is already
// stored (or repeated in Msgs), nothing is stored.
type Enqueue struct {
	// At is the broker's acceptance time (Unix ms). Messages whose NotBefore is after At are
	// delayed; the others are ready.
	At int64
	// Msgs are the messages; the engine keeps their Headers maps and Payload slices.
	Msgs []Message
}

// Lease delivers a ready message to a consumer: Attempts + 1, and the message is in flight
// until ExpiresAt. Dispatch makes and applies Lease commands; the broker persists the returned
// ones (committed delivery durability) and replays them with Apply.
type Lease struct {
	// ID is the leased message.
	ID MsgID
	// Consumer is the subscription the message was delivered to.
	Consumer string
	// LeasedAt is the delivery time (Unix ms).
	LeasedAt int64
	// ExpiresAt is when the lease ends unless acked, nacked or extended (Unix ms).
	ExpiresAt int64
}

// Ack removes a message for good: a leased one on the node that delivered it, or one in any
// state on a fast-durability queue's replica or replay (which never saw its lease).
type Ack struct {
	// ID is the acknowledged message.
	ID MsgID
	// At is the acknowledgement time (Unix ms): the next message of the acked message's
	// ordering group is scheduled then. 0 (no time) promotes nothing.
	At int64
}

// Extend moves the expiry of a lease, or leases a held message (see Queue.Hold) to the
// consumer reclaiming it. Make it with DecideExtend (or ExtendDeadline), which applies the
// 12-hour cap.
type Extend struct {
	// ID is the leased or held message.
	ID MsgID
	// ExpiresAt is the new expiry (Unix ms).
	ExpiresAt int64
	// Consumer is the subscription asking; used only when the message is held, as the
	// consumer of its new lease. DecideExtend leaves it to the broker.
	Consumer string
	// At is when the extension was asked (Unix ms); used only when the message is held, as
	// the LeasedAt of its new lease. DecideExtend sets it.
	At int64
}

// Fail ends a delivery unsuccessfully (Nack or lease expiry). Make it with DecideFailure:
// whether the message is retried or dead-lettered, when a retry becomes deliverable, and the
// attempt count are decided there, not when the command is applied.
type Fail struct {
	// ID is the failed message.
	ID MsgID
	// At is the failure time (Unix ms).
	At int64
	// Error is the failure text, recorded as the message's LastError.
	Error string
	// DeadLetter removes the message from this queue; the broker then enqueues
	// DeadLetterCopy of it into the dead-letter queue.
	DeadLetter bool
	// Reason says why a DeadLetter happened (ReasonMaxAttempts, ReasonScript, or the broker's
	// own, such as "expired"): an open set of short names, kept with the dead letter.
	Reason string
	// NotBefore is when a retried message becomes deliverable again (Unix ms); at or before
	// At means at once. Ignored when DeadLetter is set.
	NotBefore int64
	// Attempts is the message's attempt count after the failure: the failed message's
	// Attempts where DecideFailure made the command. Applying the Fail sets it, so that a
	// replica or replay that never saw the lease (fast delivery durability) counts the
	// same.
	Attempts uint32
}

// Remove deletes a stored message in any state (for redrive out of a dead-letter queue, or
// moving a message that is not leased to one). A lease on it ends silently.
type Remove struct {
	// ID is the removed message.
	ID MsgID
	// At is the removal time (Unix ms).
	At int64
}

// UpdateConfig replaces the queue's configuration. It affects later leases, failure decisions
// and DRR grants; leases, deficits and retry times already given are kept.
type UpdateConfig struct {
	// Config is the new configuration; it must pass Validate.
	Config Config
}

func (Enqueue) command()      {}
func (Lease) command()        {}
func (Ack) command()          {}
func (Extend) command()       {}
func (Fail) command()         {}
func (Remove) command()       {}
func (UpdateConfig) command() {}

var (
	_ Command = Enqueue{}
	_ Command = Lease{}
	_ Command = Ack{}
	_ Command = Extend{}
	_ Command = Fail{}
	_ Command = Remove{}
	_ Command = UpdateConfig{}
)
