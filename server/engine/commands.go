package engine

// Command is one deterministic state change of a Queue. The broker persists (and, in a cluster,
// replicates) commands and applies them with Queue.Apply or the typed Apply* methods; applying
// the same sequence to a fresh Queue reproduces the same state. Every decision that depends on
// policy, scripts or the wall clock is taken before the command is made (Dispatch, DecideFailure,
// DecideExtend), so applying a command never re-decides anything.
//
// Commands that touch the ready set carry a time (Enqueue.At, Lease.LeasedAt, Fail.At,
// Remove.At). Before applying one, the queue promotes every delayed message whose NotBefore is
// at or before that time, exactly as Dispatch and Advance do for the live queue, so promotions
// need no command of their own. The times given to one Queue must be non-decreasing (one
// broker clock) for a replay to reproduce the live delivery order exactly.
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

// Ack removes a leased message for good.
type Ack struct {
	// ID is the acknowledged message.
	ID MsgID
}

// Extend moves the expiry of a lease. Make it with DecideExtend (or ExtendDeadline), which
// applies the 12-hour cap.
type Extend struct {
	// ID is the leased message.
	ID MsgID
	// ExpiresAt is the new expiry (Unix ms).
	ExpiresAt int64
}

// Fail ends a lease unsuccessfully (Nack or lease expiry). Make it with DecideFailure: whether
// the message is retried or dead-lettered, and when a retry becomes deliverable, is decided
// there, not when the command is applied.
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
	// NotBefore is when a retried message becomes deliverable again (Unix ms); at or before
	// At means at once. Ignored when DeadLetter is set.
	NotBefore int64
	// Uncounted ends a lease that delivered nothing (a hold after a failover): the attempt it
	// counted is taken back and LastError is kept.
	Uncounted bool
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
