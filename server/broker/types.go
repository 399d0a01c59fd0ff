package broker

import (
	"sync"

	"github.com/filamq/fila/server/service"
)

// The broker speaks the service's domain types (server/service); the names below keep the
// broker's code reading as it did.

// MessageID is a message's ID, a UUIDv7.
type MessageID = service.MessageID

// Code is the outcome of one item of a hot-path request, or of an admin operation.
type Code = service.Code

const (
	CodeOk                  = service.CodeOk
	CodeQueueNotFound       = service.CodeQueueNotFound
	CodeMessageNotFound     = service.CodeMessageNotFound
	CodeStorageError        = service.CodeStorageError
	CodeChannelFull         = service.CodeChannelFull
	CodeInternalError       = service.CodeInternalError
	CodeQueueAlreadyExists  = service.CodeQueueAlreadyExists
	CodeInvalidConfigValue  = service.CodeInvalidConfigValue
	CodeReservedQueueName   = service.CodeReservedQueueName
	CodeLuaCompilationError = service.CodeLuaCompilationError
	CodeNotADLQ             = service.CodeNotADLQ
	CodeInvalidThrottle     = service.CodeInvalidThrottle
	CodeOrderingKeyMissing  = service.CodeOrderingKeyMissing
	CodeImmutableSetting    = service.CodeImmutableSetting
	CodeScriptError         = service.CodeScriptError
	CodeScriptTimeout       = service.CodeScriptTimeout
	CodeUnauthorized        = service.CodeUnauthorized
	CodeForbidden           = service.CodeForbidden
	CodeAPIKeyNotFound      = service.CodeAPIKeyNotFound
	CodeThrottleConflict    = service.CodeThrottleConflict
	CodeThrottleNotFound    = service.CodeThrottleNotFound
	CodeNotLeader           = service.CodeNotLeader
	CodeNodeNotReady        = service.CodeNodeNotReady
	CodeNodeNotFound        = service.CodeNodeNotFound
)

// The hot path's requests and results.
type (
	Message          = service.Message
	EnqueueResult    = service.EnqueueResult
	AckItem          = service.AckItem
	NackItem         = service.NackItem
	ExtendItem       = service.ExtendItem
	ExtendResult     = service.ExtendResult
	SubscribeRequest = service.SubscribeRequest
	Subscription     = service.Subscription
	Sink             = service.Sink
)

// Delivery is one leased message on its way to a consumer: the service's Delivery, and what the
// broker still has to do to it before it is handed over.
type Delivery struct {
	service.Delivery

	unread bool            // its body is still to be read from storage (bodyread.go); never handed over so
	dead   *deadLetterNote // why it is in the dead-letter queue: headers to add once its body is read
}

// handOvers recycles the slices deliveries are handed over in.
var handOvers = sync.Pool{New: func() any { return new([]service.Delivery) }}

// handOver gives ds to sink as the service's deliveries (without what the broker kept beside
// them), in a recycled slice that is the broker's again when Deliver returns.
func handOver(sink Sink, ds []Delivery, onWritten func()) bool {
	p := handOvers.Get().(*[]service.Delivery)
	out := (*p)[:0]
	for i := range ds {
		out = append(out, ds[i].Delivery)
	}
	ok := sink.Deliver(out, onWritten)
	clear(out)
	*p = out[:0]
	handOvers.Put(p)
	return ok
}
