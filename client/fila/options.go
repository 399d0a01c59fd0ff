package fila

import (
	"crypto/tls"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// Options configures a Client. A nil *Options means every default.
type Options struct {
	// APIKey is sent in the Handshake when non-empty.
	APIKey string
	// TLS enables TLS with this configuration. An empty ServerName is taken from the address.
	TLS *tls.Config
	// DialTimeout bounds connecting plus the handshake (default 10s; the Dial context also applies).
	DialTimeout time.Duration
	// WriteTimeout bounds each socket write (0 = no limit).
	WriteTimeout time.Duration
	// MaxReassembledSize caps a body received as continuation frames (default 64 MiB).
	MaxReassembledSize int
	// ChannelFullRetries is how many times a whole Enqueue frame refused with ChannelFull is sent
	// again, with exponential backoff that honours retry_after_ms (default 5; negative = never).
	ChannelFullRetries int
	// PingInterval, when positive, sends a Ping this often; a Pong missing for PongTimeout closes
	// the connection with ErrConnectionLost (default 0: the SDK only answers the server's pings).
	PingInterval time.Duration
	// PongTimeout bounds the wait for each keep-alive Pong (default 30s, as the spec says).
	PongTimeout time.Duration
	// ChannelFullBackoff is the first backoff after ChannelFull without retry_after_ms
	// (default 10ms); it doubles per retry up to 2s.
	ChannelFullBackoff time.Duration

	// MaxReconnects turns on reconnection and bounds it: when the connection drops (server
	// restart, kill, network reset, Disconnect, a missing Pong), the client dials again, up to
	// MaxReconnects attempts per outage (each attempt tries every seed address in turn), or
	// without limit when negative. 0, the default, is no reconnection: the client stops when its
	// connection ends, as Done and Err report. A successful reconnect resets the count.
	//
	// While reconnecting, calls wait for the connection within their context and then fail with
	// a *ReconnectError (errors.Is ErrDisconnected); requests that were in flight when the
	// connection dropped fail with an error wrapping ErrConnectionLost or ErrServerDisconnected
	// (they may or may not have taken effect), except a Producer's, which are sent again.
	// Consumers resubscribe by themselves. When the attempts run out the client stops with a
	// *ReconnectError as Err.
	MaxReconnects int
	// DialRetry makes Dial and DialSeeds wait for a broker that is not up yet. When no address
	// answers, they try again after the reconnection backoff (ReconnectWait doubling up to
	// MaxReconnectWait, jittered), each attempt trying every address in turn within DialTimeout,
	// until one answers; until the Dial context ends (a *ReconnectError whose Cause is the
	// context's error and Last the last dial failure); or, when MaxReconnects N is positive, until
	// N attempts failed (a *ReconnectError). A broker that answers and refuses (Unauthorized,
	// UnsupportedVersion, ...) and the connection mistakes (ErrTLSRequired, ErrTLSNotServed,
	// ErrHTTPServer) end Dial at once with that error; NodeNotReady is tried again. false, the
	// default, fails fast: one attempt, and the last address's failure.
	DialRetry bool
	// ReconnectWait is the backoff before the first attempt of an outage (default 100ms); it
	// doubles per attempt up to MaxReconnectWait, and each wait is drawn uniformly from
	// [w/2, w) (jitter).
	ReconnectWait time.Duration
	// MaxReconnectWait caps the backoff between attempts (default 5s, at least ReconnectWait).
	MaxReconnectWait time.Duration
	// ConnectionHandler, when set, is called on every Disconnected, Reconnected and
	// ReconnectFailed event, on the client's own goroutines: it must return quickly.
	ConnectionHandler func(ConnectionEvent)
	// FailoverTimeout bounds how long a Cluster call goes on retrying what a leader change or a
	// lost node answers (NotLeader, NodeNotReady, AuthStateStale, ChannelFull, a connection
	// lost or refused) before it reports the last failure (default DefaultFailoverTimeout, 30s).
	// The call's context bounds it too. A plain Client does not use it.
	FailoverTimeout time.Duration
	// Logger receives the SDK's log records (connection lost, reconnected, resubscription
	// failures; Debug: each failed attempt and resent frame). nil = no logging.
	Logger *slog.Logger
	// Propagator, when set (propagation.TraceContext{} for W3C Trace Context), carries traces
	// across the queue in message headers: Enqueue and Producer.Send inject the context's trace,
	// Delivery.TraceContext and Consume's handler context extract it (see trace.go). nil = off.
	Propagator propagation.TextMapPropagator
}

const (
	defaultDialTimeout        = 10 * time.Second
	defaultMaxReassembled     = 64 << 20
	defaultChannelFullRetries = 5
	defaultChannelFullBackoff = 10 * time.Millisecond
	maxChannelFullBackoff     = 2 * time.Second
	maxReassemblyPartials     = 64
	defaultReconnectWait      = 100 * time.Millisecond
	defaultMaxReconnectWait   = 5 * time.Second
)

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.DialTimeout <= 0 {
		r.DialTimeout = defaultDialTimeout
	}
	if r.MaxReassembledSize <= 0 {
		r.MaxReassembledSize = defaultMaxReassembled
	}
	if r.ChannelFullRetries == 0 {
		r.ChannelFullRetries = defaultChannelFullRetries
	}
	if r.ChannelFullRetries < 0 {
		r.ChannelFullRetries = 0
	}
	if r.PongTimeout <= 0 {
		r.PongTimeout = 30 * time.Second
	}
	if r.ChannelFullBackoff <= 0 {
		r.ChannelFullBackoff = defaultChannelFullBackoff
	}
	if r.ReconnectWait <= 0 {
		r.ReconnectWait = defaultReconnectWait
	}
	if r.MaxReconnectWait <= 0 {
		r.MaxReconnectWait = defaultMaxReconnectWait
	}
	r.MaxReconnectWait = max(r.MaxReconnectWait, r.ReconnectWait)
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// durationMs converts a duration to whole milliseconds, rounding a positive sub-millisecond
// remainder up so that a small positive duration never becomes 0 ("server default").
func durationMs(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Millisecond - 1) / time.Millisecond)
}

// msTime converts Unix milliseconds to a time; 0 gives the zero time.
func msTime(ms uint64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms))
}

// Ptr returns a pointer to v, for the optional fields of QueueUpdate.
func Ptr[T any](v T) *T { return &v }
