// Package session is the FIBP side of the broker: it turns decoded FIBP requests into the
// broker's domain types, the broker's results into FIBP result frames, and deliveries into
// Delivery frames (split into continuation frames when one would exceed the maximum frame size).
// The transport frames bytes on sockets; the broker knows nothing of FIBP's hot-path frames.
package session

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
)

// ErrorCode is the FIBP error code of a broker result code.
func ErrorCode(c broker.Code) fibp.ErrorCode {
	switch c {
	case broker.CodeOk:
		return fibp.CodeOk
	case broker.CodeQueueNotFound:
		return fibp.CodeQueueNotFound
	case broker.CodeMessageNotFound:
		return fibp.CodeMessageNotFound
	case broker.CodeStorageError:
		return fibp.CodeStorageError
	case broker.CodeChannelFull:
		return fibp.CodeChannelFull
	case broker.CodeQueueAlreadyExists:
		return fibp.CodeQueueAlreadyExists
	case broker.CodeInvalidConfigValue:
		return fibp.CodeInvalidConfigValue
	case broker.CodeReservedQueueName:
		return fibp.CodeReservedQueueName
	case broker.CodeLuaCompilationError:
		return fibp.CodeLuaCompilationError
	case broker.CodeNotADLQ:
		return fibp.CodeNotADLQ
	case broker.CodeInvalidThrottle:
		return fibp.CodeInvalidThrottle
	case broker.CodeOrderingKeyMissing:
		return fibp.CodeOrderingKeyMissing
	case broker.CodeImmutableSetting:
		return fibp.CodeImmutableSetting
	case broker.CodeScriptError:
		return fibp.CodeScriptError
	case broker.CodeScriptTimeout:
		return fibp.CodeScriptTimeout
	case broker.CodeUnauthorized:
		return fibp.CodeUnauthorized
	case broker.CodeForbidden:
		return fibp.CodeForbidden
	case broker.CodeAPIKeyNotFound:
		return fibp.CodeAPIKeyNotFound
	case broker.CodeThrottleConflict:
		return fibp.CodeThrottleConflict
	case broker.CodeThrottleNotFound:
		return fibp.CodeThrottleNotFound
	default:
		return fibp.CodeInternalError
	}
}

// ErrorFrame is the Error frame of a request-level broker failure.
func ErrorFrame(e *broker.Error) *fibp.Error {
	f := &fibp.Error{ErrorCode: ErrorCode(e.Code), Message: ErrorMessage(e.Message)}
	if e.RetryAfterMs > 0 {
		f.Metadata = map[string]string{fibp.MetaRetryAfterMs: strconv.Itoa(e.RetryAfterMs)}
	}
	return f
}

// ErrorMessage fits msg into an Error frame's message, a UTF-8 string of at most 65,535 bytes: a
// longer one (it may quote a client's longest names) is cut at a character boundary, and bytes
// that are not UTF-8 (a Lua compiler's message, an OS error naming a path) become U+FFFD.
func ErrorMessage(msg string) string {
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	if len(msg) <= math.MaxUint16 {
		return msg
	}
	cut := math.MaxUint16
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// AppendFrame appends f as one frame, or as continuation frames when it exceeds the maximum
// frame size.
func AppendFrame(dst []byte, requestID uint32, f fibp.Frame) []byte {
	size := fibp.LengthSize + fibp.HeaderSize + f.Size()
	if size-fibp.LengthSize > fibp.MaxFrameSize {
		return fibp.AppendContinued(dst, f.Opcode(), requestID, f.AppendTo(nil), fibp.MaxFrameSize)
	}
	if dst == nil {
		dst = make([]byte, 0, size)
	}
	return fibp.AppendFrame(dst, 0, requestID, f)
}
