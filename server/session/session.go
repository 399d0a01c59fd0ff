// Package session is the FIBP side of the queue service (server/service): it turns decoded FIBP
// requests into the service's domain types, the service's results into FIBP result frames, and
// deliveries into Delivery frames (split into continuation frames when one would exceed the
// maximum frame size); FIBP's enumerations and error codes are mapped here and nowhere else. The
// transport frames bytes on sockets; the service knows nothing of FIBP.
package session

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/service"
)

// ErrorCode is the FIBP error code of a service result code.
func ErrorCode(c service.Code) fibp.ErrorCode {
	switch c {
	case service.CodeOk:
		return fibp.CodeOk
	case service.CodeQueueNotFound:
		return fibp.CodeQueueNotFound
	case service.CodeMessageNotFound:
		return fibp.CodeMessageNotFound
	case service.CodeStorageError:
		return fibp.CodeStorageError
	case service.CodeChannelFull:
		return fibp.CodeChannelFull
	case service.CodeQueueAlreadyExists:
		return fibp.CodeQueueAlreadyExists
	case service.CodeInvalidConfigValue:
		return fibp.CodeInvalidConfigValue
	case service.CodeReservedQueueName:
		return fibp.CodeReservedQueueName
	case service.CodeLuaCompilationError:
		return fibp.CodeLuaCompilationError
	case service.CodeNotADLQ:
		return fibp.CodeNotADLQ
	case service.CodeInvalidThrottle:
		return fibp.CodeInvalidThrottle
	case service.CodeOrderingKeyMissing:
		return fibp.CodeOrderingKeyMissing
	case service.CodeImmutableSetting:
		return fibp.CodeImmutableSetting
	case service.CodeScriptError:
		return fibp.CodeScriptError
	case service.CodeScriptTimeout:
		return fibp.CodeScriptTimeout
	case service.CodeUnauthorized:
		return fibp.CodeUnauthorized
	case service.CodeForbidden:
		return fibp.CodeForbidden
	case service.CodeAPIKeyNotFound:
		return fibp.CodeAPIKeyNotFound
	case service.CodeThrottleConflict:
		return fibp.CodeThrottleConflict
	case service.CodeThrottleNotFound:
		return fibp.CodeThrottleNotFound
	case service.CodeNotLeader:
		return fibp.CodeNotLeader
	case service.CodeNodeNotReady:
		return fibp.CodeNodeNotReady
	case service.CodeNodeNotFound:
		return fibp.CodeNodeNotFound
	default:
		return fibp.CodeInternalError
	}
}

// ErrorFrame is the Error frame of a request-level failure: with the back-off a ChannelFull
// suggests, or the leader a NotLeader names.
func ErrorFrame(e *service.Error) *fibp.Error {
	f := &fibp.Error{ErrorCode: ErrorCode(e.Code), Message: ErrorMessage(e.Message)}
	switch {
	case e.RetryAfterMs > 0:
		f.Metadata = map[string]string{fibp.MetaRetryAfterMs: strconv.Itoa(e.RetryAfterMs)}
	case e.Code == service.CodeNotLeader && e.LeaderAddr != "":
		f.Metadata = map[string]string{fibp.MetaLeaderAddr: e.LeaderAddr}
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
