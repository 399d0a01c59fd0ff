package service

import (
	"encoding/hex"

	"github.com/filamq/fila/server/throttle"
)

// MessageID is a message's ID, a UUIDv7.
type MessageID [16]byte

// String renders id in the UUID text form.
func (id MessageID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// Message is one message to enqueue. Enqueue copies Payload; Headers and the strings are kept
// as they are, so the caller must not change them afterwards.
type Message struct {
	Queue   string
	Headers map[string]string
	Payload []byte
	// FairnessKey groups messages for fair scheduling; empty means the default key.
	FairnessKey string
	// Weight is the fairness key's weight; 0 means 1.
	Weight uint32
	// DelayMs holds the message back for that many milliseconds; 0 means deliverable at once.
	DelayMs uint64
	// IdempotencyKey, when HasKey, deduplicates repeats within the queue's dedup window.
	IdempotencyKey string
	HasKey         bool
}

// EnqueueResult is the outcome of one message of an Enqueue.
type EnqueueResult struct {
	Code Code
	ID   MessageID // the new message's ID, or the original's for a duplicate
	// Duplicate reports that the idempotency key was seen within the window: nothing was stored.
	Duplicate bool
	// Refusal says why a CodeChannelFull message was refused, when the queue knows (its
	// max_depth): the Error of a whole refused Enqueue. The edges answer with Code alone.
	Refusal *Error
	// Leader, with CodeNotLeader, is where the queue's leader is, when this node knows (the
	// EnqueueResult's route hint).
	Leader *Route
}

// AckItem names one leased message to acknowledge.
type AckItem struct {
	Queue   string
	ID      MessageID
	Session string // who settles; see SubscribeRequest.Session
}

// NackItem names one leased message to fail.
type NackItem struct {
	Queue   string
	ID      MessageID
	Session string // who settles; see SubscribeRequest.Session
	Error   string // why it failed, kept with the message
	// RetryAfterMs, when HasRetryAfter, replaces the retry policy's back-off (milliseconds).
	RetryAfterMs  uint64
	HasRetryAfter bool
}

// ExtendItem names one leased message whose lease to extend by ExtendByMs milliseconds from now
// (capped by the engine).
type ExtendItem struct {
	Queue      string
	ID         MessageID
	Session    string // who settles; see SubscribeRequest.Session
	ExtendByMs uint64
}

// ExtendResult is the outcome of one ExtendItem.
type ExtendResult struct {
	Code      Code
	ExpiresAt int64 // Unix ms: the lease's new expiry, when Code is CodeOk
}

// ThrottleDeclaration, ThrottleLimit and ThrottlePolicy are a subscription's throttles
// (throttling.md).
type (
	ThrottleDeclaration = throttle.Declaration
	ThrottleLimit       = throttle.Limit
	ThrottlePolicy      = throttle.Policy
)

// SubscribeRequest asks for the deliveries of one queue.
type SubscribeRequest struct {
	Queue      string
	ConsumerID string // unique per node
	// Session names the connection the subscription belongs to. A message leased to a live
	// subscription is settled (Ack, Nack, ExtendLease) only by items of the same Session: a
	// settlement from another session comes from a consumer whose lease ended when the message
	// was redelivered, and answers MessageNotFound. A lease whose subscription has ended (its
	// connection closed) may be settled from any session; items with an empty Session are not
	// checked.
	Session string
	// Credit is the number of deliveries the consumer accepts before it grants more; 0, or
	// ManagedCredit, has the server manage the window itself (it refills as deliveries are written).
	Credit        uint32
	ManagedCredit bool
	// Throttles are the subscription's throttle declarations (throttling.md); Subscribe
	// validates them (CodeInvalidThrottle) and refuses conflicting ones (CodeThrottleConflict).
	Throttles []ThrottleDeclaration
	// Holder is the API key that made the subscription ("" without authentication): the
	// throttles' bucket memory is shared fairly between holders (docs/throttles.md).
	Holder string
}

// Delivery is one leased message on its way to a consumer.
type Delivery struct {
	ID           MessageID
	Queue        string
	Headers      map[string]string
	Payload      []byte
	FairnessKey  string
	Weight       uint32
	Attempt      uint32 // 1 on the first delivery
	RedriveCount uint32 // times redriven from the dead-letter queue
	EnqueuedAt   int64  // Unix ms
	LeasedAt     int64  // Unix ms
	ExpiresAt    int64  // Unix ms: when the lease runs out (a lower bound)
}

// The headers a delivery (or a peek) of a dead-lettered message carries besides its own, saying
// why it is in the dead-letter queue (docs/dead-letter.md). They are added while the message is
// there; a message's own headers of the same names are replaced. Redrive takes the message out of
// the dead-letter queue and so delivers it without them.
const (
	// HeaderDeadLetterReason: why it was dead-lettered: max_attempts, script, unclassified,
	// expired, max_depth (an open set: clients should show an unknown one as it is).
	HeaderDeadLetterReason = "fila-dead-letter-reason"
	// HeaderDeadLetterError: the error text it was dead-lettered with (a Nack's error, "lease
	// expired", the script's error, the limit that expired or dropped it).
	HeaderDeadLetterError = "fila-dead-letter-error"
	// HeaderDeadLetterQueue: the queue it came from.
	HeaderDeadLetterQueue = "fila-dead-letter-queue"
	// HeaderDeadLetterAttempts: its attempt count when it was dead-lettered (decimal).
	HeaderDeadLetterAttempts = "fila-dead-letter-attempts"
	// HeaderDeadLetterAt: when it was dead-lettered (Unix ms, decimal).
	HeaderDeadLetterAt = "fila-dead-letter-at"
)
