package transport

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/lograte"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/session"
)

// newErrorCounter is fila_errors_total{code}: every error code the server answered with, whether
// as an Error frame, an admin result or one item of an Enqueue, Ack, Nack or ExtendLease
// result. The label takes the FIBP error code names (a fixed set).
func newErrorCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "fila", Name: "errors_total",
		Help: "Error codes answered to clients, by FIBP code name (Error frames, admin results and per-item results).",
	}, []string{"code"})
}

func (s *Server) countError(code fibp.ErrorCode) {
	if code != fibp.CodeOk {
		s.errors.WithLabelValues(code.String()).Inc()
	}
}

func (s *Server) countCode(code service.Code) {
	if code != service.CodeOk {
		s.countError(session.ErrorCode(code))
	}
}

// readOnlyAdmin lists the admin requests that change nothing: they are logged at debug, every
// other admin request at info.
var readOnlyAdmin = map[fibp.Opcode]bool{
	fibp.OpGetStats: true, fibp.OpListQueues: true, fibp.OpGetConfig: true, fibp.OpListConfig: true,
	fibp.OpGetClusterStatus: true, fibp.OpGetRoutes: true, fibp.OpGetThrottleStats: true,
	fibp.OpGetThrottleBucket: true, fibp.OpListAPIKeys: true, fibp.OpGetACL: true,
}

// logAdmin records one admin request and its outcome (e nil: it succeeded).
func (c *conn) logAdmin(op fibp.Opcode, e *service.Error) {
	level := slog.LevelInfo
	if readOnlyAdmin[op] {
		level = slog.LevelDebug
	}
	if e == nil {
		c.log.Log(context.Background(), level, "admin request", "op", op.String())
		return
	}
	c.log.Log(context.Background(), level, "admin request failed", "op", op.String(), "code", session.ErrorCode(e.Code).String(), "msg", e.Message)
}

// logRequest records a request at debug level; it costs one check when debug is off.
func (c *conn) logRequest(h fibp.Header, body []byte) {
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("request", "op", h.Opcode.String(), "request_id", h.RequestID, "bytes", len(body))
	}
}

// deniedLogInterval is the least time between two log lines of authentication failures, and
// between two of refused permissions: clients cause both at will.
const deniedLogInterval = time.Second

// deniedLogs bounds the log lines of logDenied, one limiter per kind.
type deniedLogs struct{ unauthorized, forbidden *lograte.Limiter }

func newDeniedLogs(now func() time.Time) deniedLogs {
	return deniedLogs{lograte.New(deniedLogInterval, now), lograte.New(deniedLogInterval, now)}
}

// logDenied records an authentication failure (Unauthorized) or a refused permission
// (Forbidden) at info, with the connection's remote address and key, and why: at most one line
// of each kind per deniedLogInterval, with the count of those left out since the previous one
// (fila_errors_total counts every one).
func (c *conn) logDenied(code fibp.ErrorCode, msg string) {
	var l *lograte.Limiter
	var what string
	switch code {
	case fibp.CodeUnauthorized:
		l, what = c.s.denied.unauthorized, "authentication failed"
	case fibp.CodeForbidden:
		l, what = c.s.denied.forbidden, "permission denied"
	default:
		return
	}
	if ok, held := l.Allow(); ok {
		c.log.Info(what, "why", msg, "not_logged_before", held)
	}
}
