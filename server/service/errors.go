package service

import (
	"fmt"
	"strconv"
)

// Code is the outcome of one item of a hot-path request (a message of an Enqueue, an item of an
// Ack, Nack or ExtendLease), or of an admin operation. The session maps it to the protocol's
// error codes. New codes are added at the end: the values are not stored, but tests list them
// in order.
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
	// Routing failures (clustering.md), answered by a router, never by the local broker.
	CodeNotLeader    // another node leads the queue: Error.LeaderAddr names it when known
	CodeNodeNotReady // no leader is known yet (an election, a node still starting)
	// Cluster operations.
	CodeNodeNotFound // no node of the cluster has the ID (or it is no member of the queue's group)
)

var codeNames = [...]string{"Ok", "QueueNotFound", "MessageNotFound", "StorageError", "ChannelFull", "InternalError",
	"QueueAlreadyExists", "InvalidConfigValue", "ReservedQueueName", "LuaCompilationError", "NotADLQ", "InvalidThrottle",
	"OrderingKeyMissing", "ImmutableSetting", "ScriptError", "ScriptTimeout",
	"Unauthorized", "Forbidden", "APIKeyNotFound",
	"ThrottleConflict", "ThrottleNotFound",
	"NotLeader", "NodeNotReady", "NodeNotFound"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Error is a failure with its code and a human-readable message. From a hot-path request it
// fails the whole request (the session sends an Error frame); from an admin operation its Code is
// the result's error code.
type Error struct {
	Code    Code
	Message string
	// RetryAfterMs, when not 0, is the back-off suggested with CodeChannelFull.
	RetryAfterMs int
	// LeaderAddr, with CodeNotLeader, is the address ("host:port") of the queue's leader, when
	// known.
	LeaderAddr string
}

func (e *Error) Error() string { return fmt.Sprintf("%v: %s", e.Code, e.Message) }

// Errorf returns an Error of code with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
