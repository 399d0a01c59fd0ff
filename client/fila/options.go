package fila

import (
	"crypto/tls"
	"time"
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
}

const (
	defaultDialTimeout        = 10 * time.Second
	defaultMaxReassembled     = 64 << 20
	defaultChannelFullRetries = 5
	defaultChannelFullBackoff = 10 * time.Millisecond
	maxChannelFullBackoff     = 2 * time.Second
	maxReassemblyPartials     = 64
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
