package fila

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// Error is a failure reported by the broker: an Error frame answering a whole request, a non-zero
// error_code in an admin result, or one item of a batch result. Metadata holds every entry of the
// Error frame's metadata map, including keys this SDK does not know.
type Error struct {
	Code     Code
	Message  string
	Metadata map[string]string
}

// Error renders "fila: <message> (<Code>)"; without a message it uses the code's description.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = describe(e.Code)
	}
	return "fila: " + msg + " (" + e.Code.String() + ")"
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, fila.ErrQueueNotFound) matches any QueueNotFound failure.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// describe turns the spec's description of a code into message text.
func describe(code fibp.ErrorCode) string {
	d := code.Description()
	if d == "" {
		return fmt.Sprintf("error code %#02x", uint8(code))
	}
	if len(d) > 1 && d[0] >= 'A' && d[0] <= 'Z' && (d[1] < 'A' || d[1] > 'Z') {
		d = strings.ToLower(d[:1]) + d[1:]
	}
	return strings.ReplaceAll(d, "`", "")
}

// Sentinels, one per error code, for errors.Is. Their Message and Metadata are empty; compare,
// never modify them.
var (
	ErrQueueNotFound       = &Error{Code: fibp.CodeQueueNotFound}
	ErrMessageNotFound     = &Error{Code: fibp.CodeMessageNotFound}
	ErrQueueAlreadyExists  = &Error{Code: fibp.CodeQueueAlreadyExists}
	ErrLuaCompilation      = &Error{Code: fibp.CodeLuaCompilationError}
	ErrStorage             = &Error{Code: fibp.CodeStorageError}
	ErrNotADLQ             = &Error{Code: fibp.CodeNotADLQ}
	ErrParentQueueNotFound = &Error{Code: fibp.CodeParentQueueNotFound}
	ErrInvalidConfigValue  = &Error{Code: fibp.CodeInvalidConfigValue}
	ErrChannelFull         = &Error{Code: fibp.CodeChannelFull}
	ErrUnauthorized        = &Error{Code: fibp.CodeUnauthorized}
	ErrForbidden           = &Error{Code: fibp.CodeForbidden}
	ErrNotLeader           = &Error{Code: fibp.CodeNotLeader}
	ErrUnsupportedVersion  = &Error{Code: fibp.CodeUnsupportedVersion}
	ErrInvalidFrame        = &Error{Code: fibp.CodeInvalidFrame}
	ErrAPIKeyNotFound      = &Error{Code: fibp.CodeAPIKeyNotFound}
	ErrNodeNotReady        = &Error{Code: fibp.CodeNodeNotReady}
	ErrCreditExhausted     = &Error{Code: fibp.CodeCreditExhausted}
	ErrThrottleConflict    = &Error{Code: fibp.CodeThrottleConflict}
	ErrScriptError         = &Error{Code: fibp.CodeScriptError}
	ErrScriptTimeout       = &Error{Code: fibp.CodeScriptTimeout}
	ErrOrderingKeyMissing  = &Error{Code: fibp.CodeOrderingKeyMissing}
	ErrReservedQueueName   = &Error{Code: fibp.CodeReservedQueueName}
	ErrInvalidThrottle     = &Error{Code: fibp.CodeInvalidThrottle}
	ErrThrottleNotFound    = &Error{Code: fibp.CodeThrottleNotFound}
	ErrAuthStateStale      = &Error{Code: fibp.CodeAuthStateStale}
	ErrImmutableSetting    = &Error{Code: fibp.CodeImmutableSetting}
	ErrNodeNotFound        = &Error{Code: fibp.CodeNodeNotFound}
	ErrInternal            = &Error{Code: fibp.CodeInternalError}
)

// Local failures of the connection and of the SDK's own objects.
var (
	// ErrClosed: the Client was closed by Close.
	ErrClosed = errors.New("fila: client closed")
	// ErrServerDisconnected: the server sent Disconnect; requests it had not answered failed.
	ErrServerDisconnected = errors.New("fila: server closed the connection (Disconnect)")
	// ErrConnectionLost is wrapped by the error of every request that failed because the
	// connection broke.
	ErrConnectionLost = errors.New("fila: connection lost")
	// ErrConsumerClosed: the Consumer was closed by Close.
	ErrConsumerClosed = errors.New("fila: consumer closed")
	// ErrProducerClosed: the Producer was closed by Close.
	ErrProducerClosed = errors.New("fila: producer closed")
)

// ErrorCode returns the broker error code carried by err, if any.
func ErrorCode(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}

// RetryAfter returns the backoff a ChannelFull error suggests (metadata retry_after_ms).
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != fibp.CodeChannelFull {
		return 0, false
	}
	ms, perr := strconv.ParseUint(e.Metadata[fibp.MetaRetryAfterMs], 10, 32)
	if perr != nil {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// LeaderAddr returns the host:port a NotLeader error points to (metadata leader_addr).
func LeaderAddr(err error) (string, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != fibp.CodeNotLeader {
		return "", false
	}
	addr, ok := e.Metadata[fibp.MetaLeaderAddr]
	return addr, ok && addr != ""
}

// errorFromFrame converts a received Error frame. The frame's map is owned by the caller.
func errorFromFrame(f *fibp.Error) *Error {
	return &Error{Code: f.ErrorCode, Message: f.Message, Metadata: f.Metadata}
}

// resultError turns the error_code of a result (or of one batch item) into an error naming the
// subject of the request, such as `queue "orders"`. CodeOk gives nil.
func resultError(code fibp.ErrorCode, subject string) error {
	if code == fibp.CodeOk {
		return nil
	}
	var msg string
	switch code {
	case fibp.CodeQueueNotFound, fibp.CodeMessageNotFound, fibp.CodeAPIKeyNotFound,
		fibp.CodeThrottleNotFound, fibp.CodeNodeNotFound:
		msg = subject + " not found"
	case fibp.CodeQueueAlreadyExists:
		msg = subject + " already exists"
	case fibp.CodeNotADLQ:
		msg = subject + " is not a dead-letter queue"
	default:
		msg = subject + ": " + describe(code)
	}
	if subject == "" {
		msg = describe(code)
	}
	return &Error{Code: code, Message: msg}
}

// invalidFrame is the local InvalidFrame failure of a request whose answer could not be used.
func invalidFrame(format string, args ...any) *Error {
	return &Error{Code: fibp.CodeInvalidFrame, Message: fmt.Sprintf(format, args...)}
}

func queueSubject(name string) string { return "queue " + strconv.Quote(name) }
