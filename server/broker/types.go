package broker

import (
	"strconv"

	"github.com/filamq/fila/server/engine"
)

// MessageID is a message's ID, a UUIDv7.
type MessageID = engine.MsgID

// Code is the outcome of one item of a hot-path request (a message of an Enqueue, an item of an
// Ack, Nack or ExtendLease), or of an admin operation. The session maps it to the protocol's
// error codes.
type Code uint8

const (
	CodeOk              Code = iota
	CodeQueueNotFound        // the queue does not exist
	CodeMessageNotFound      // no such message, or it is not leased
	CodeStorageError         // the round's log append failed
	CodeChannelFull          // the queue's inbox is full; back off and retry
	CodeInternalError        // an unexpected failure
	// Admin and subscription failures.
	CodeQueueAlreadyExists
	CodeInvalidConfigValue
	CodeReservedQueueName   // names ending in ".dlq" belong to dead-letter queues
	CodeLuaCompilationError // a Lua hook does not compile or lacks its function
	CodeNotADLQ             // Redrive of a queue that is not a dead-letter queue
	CodeInvalidThrottle     // a malformed throttle declaration
	CodeOrderingKeyMissing  // a message without the ordering key of a queue that rejects those
	CodeImmutableSetting    // an UpdateQueue of a setting fixed at creation
	CodeScriptError         // the queue's on_enqueue failed on this message (reject policy)
	CodeScriptTimeout       // the queue's on_enqueue ran out of time on this message (reject policy)
	// Authentication and authorization failures (server/auth).
	CodeUnauthorized   // no key, or an unknown, expired or revoked one
	CodeForbidden      // the key's ACL does not allow this
	CodeAPIKeyNotFound // no API key has this ID
	// Throttle failures.
	CodeThrottleConflict // a throttle name declared by live subscriptions with another key or policy
	CodeThrottleNotFound // no live subscription declares the throttle
)

var codeNames = [...]string{"Ok", "QueueNotFound", "MessageNotFound", "StorageError", "ChannelFull", "InternalError",
	"QueueAlreadyExists", "InvalidConfigValue", "ReservedQueueName", "LuaCompilationError", "NotADLQ", "InvalidThrottle",
	"OrderingKeyMissing", "ImmutableSetting", "ScriptError", "ScriptTimeout",
	"Unauthorized", "Forbidden", "APIKeyNotFound",
	"ThrottleConflict", "ThrottleNotFound"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
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
	// refusal says why a ChannelFull message was refused, when the queue knows (its max_depth):
	// the Error of a whole refused Enqueue.
	refusal *Error
}

// AckItem names one leased message to acknowledge.
type AckItem struct {
	Queue   string
	ID      MessageID
	Session string // who settles; see Subscription.Session
}

// NackItem names one leased message to fail.
type NackItem struct {
	Queue   string
	ID      MessageID
	Session string // who settles; see Subscription.Session
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
	Session    string // who settles; see Subscription.Session
	ExtendByMs uint64
}

// ExtendResult is the outcome of one ExtendItem.
type ExtendResult struct {
	Code      Code
	ExpiresAt int64 // Unix ms: the lease's new expiry, when Code is CodeOk
}

// Subscription asks for the deliveries of one queue.
type Subscription struct {
	Queue      string
	ConsumerID string // unique per broker
	RequestID  uint32 // the sink's name for this subscription; passed back with every call
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

	unread bool            // its body is still to be read from storage (bodyread.go); never handed over so
	dead   *deadLetterNote // why it is in the dead-letter queue: headers to add once its body is read
}

// Sink carries one subscription's events to its consumer's connection. The session implements it.
// Its methods must not block.
type Sink interface {
	// Subscribed is called once, before any Deliver, when the subscription has started.
	Subscribed(requestID uint32, consumerID string)
	// Deliver hands over a batch of deliveries for the subscription requestID. ds and the slice
	// it is backed by are the broker's again once Deliver returns (the sink encodes or copies what
	// it needs); Headers and Payload are shared with the broker's body cache and must never be
	// changed. onWritten, when not nil, is called once the batch has reached the socket. Deliver
	// returns false when the connection is gone or too far behind; the subscription then ends.
	Deliver(requestID uint32, ds []Delivery, onWritten func()) bool
	// Ended is called once when the broker ends the subscription by itself (its queue was
	// deleted; e says why), after its last Deliver. It is not called after Unsubscribe. It may
	// be called after a Deliver that returned false (the queue can be deleted before that
	// subscription is dropped), so a sink must take Ended for a subscription it has given up on.
	Ended(requestID uint32, e *Error)
}
