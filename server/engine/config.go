package engine

import (
	"errors"
	"fmt"
	"math"
)

// Backoff is a queue's retry backoff policy (concepts.md, "Retry policy"). Its values are those of
// the FIBP `backoff` enum so the broker can copy them across unchanged.
type Backoff uint8

const (
	// BackoffDefault means "use the server default". It is only meaningful before
	// Config.WithDefaults; Validate rejects it.
	BackoffDefault Backoff = 0
	// BackoffNone retries immediately (delay 0).
	BackoffNone Backoff = 1
	// BackoffFixed retries after BackoffInitialMs.
	BackoffFixed Backoff = 2
	// BackoffExponential retries after min(BackoffMaxMs, BackoffInitialMs × 2^(attempts−1)).
	BackoffExponential Backoff = 3
)

var backoffNames = [...]string{"server_default", "none", "fixed", "exponential"}

// String returns the FIBP name of b; unknown values print as "Backoff(n)".
func (b Backoff) String() string {
	if int(b) < len(backoffNames) {
		return backoffNames[b]
	}
	return fmt.Sprintf("Backoff(%d)", uint8(b))
}

// MarshalText implements encoding.TextMarshaler with the FIBP names.
func (b Backoff) MarshalText() ([]byte, error) {
	if int(b) >= len(backoffNames) {
		return nil, fmt.Errorf("engine: unknown backoff %d", uint8(b))
	}
	return []byte(backoffNames[b]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts the names String returns.
func (b *Backoff) UnmarshalText(text []byte) error {
	for i, n := range backoffNames {
		if string(text) == n {
			*b = Backoff(i)
			return nil
		}
	}
	return fmt.Errorf("engine: unknown backoff %q", text)
}

// MaxLeaseExtensionMs caps ExtendLease: a lease can be extended to at most 12 hours from now
// (concepts.md, "Leases").
const MaxLeaseExtensionMs = 12 * 60 * 60 * 1000

// Config is the per-queue configuration the engine needs. It is a plain value: the broker owns
// the source of truth (CreateQueue / UpdateQueue / runtime config) and changes it on a live queue
// with the UpdateConfig command, so a replay sees the same configuration at the same point.
type Config struct {
	// VisibilityTimeoutMs is the lease duration of a delivery. Must be ≥ 1.
	VisibilityTimeoutMs uint64
	// MaxAttempts: a failing message whose attempt count has reached MaxAttempts is
	// dead-lettered instead of retried. Must be ≥ 1.
	MaxAttempts uint32
	// Backoff selects the retry delay when neither the Nack nor the failure policy gives one.
	Backoff Backoff
	// BackoffInitialMs is the fixed delay, or the first exponential delay. Must be ≥ 1 unless
	// Backoff is BackoffNone.
	BackoffInitialMs uint64
	// BackoffMaxMs caps the exponential delay. Must be ≥ BackoffInitialMs for
	// BackoffExponential; ignored otherwise.
	BackoffMaxMs uint64
	// Quantum is the DRR quantum: each round a fairness key receives weight × Quantum deficit,
	// and each delivery costs 1. Must be ≥ 1.
	Quantum uint32
	// Alloc gives the Queue's big buffers memory outside the Go heap (alloc.go); nil takes them
	// from the Go heap. It is where this node keeps the queue, not replicated configuration: a
	// Queue keeps the Allocator it was made with (NewQueue, NewRestorer) and reports it here,
	// UpdateConfig leaves it unchanged, and Validate and WithDefaults ignore it. Configs are
	// compared with ==, so its dynamic type must be comparable (a pointer, as offheap's).
	Alloc Allocator
}

// DefaultConfig returns the server defaults of concepts.md: visibility timeout 30 s,
// 10 attempts, exponential backoff from 1 s to 5 min, quantum 1.
func DefaultConfig() Config {
	return Config{
		VisibilityTimeoutMs: 30_000,
		MaxAttempts:         10,
		Backoff:             BackoffExponential,
		BackoffInitialMs:    1_000,
		BackoffMaxMs:        300_000,
		Quantum:             1,
	}
}

// WithDefaults returns c with every zero field (and BackoffDefault) replaced by the
// corresponding field of DefaultConfig, mirroring "0 = server default" in CreateQueue.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.VisibilityTimeoutMs == 0 {
		c.VisibilityTimeoutMs = d.VisibilityTimeoutMs
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.Backoff == BackoffDefault {
		c.Backoff = d.Backoff
	}
	if c.BackoffInitialMs == 0 {
		c.BackoffInitialMs = d.BackoffInitialMs
	}
	if c.BackoffMaxMs == 0 {
		c.BackoffMaxMs = d.BackoffMaxMs
	}
	if c.Quantum == 0 {
		c.Quantum = d.Quantum
	}
	return c
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("engine: invalid config")

// Validate reports every problem with c at once (errors.Join), each wrapping ErrInvalidConfig.
// A nil result means the engine accepts c.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.VisibilityTimeoutMs == 0 {
		bad("visibility timeout must be at least 1 ms")
	}
	if c.VisibilityTimeoutMs > math.MaxInt64/2 {
		bad("visibility timeout %d ms is too large", c.VisibilityTimeoutMs)
	}
	if c.MaxAttempts == 0 {
		bad("max attempts must be at least 1")
	}
	if c.Quantum == 0 {
		bad("quantum must be at least 1")
	}
	switch c.Backoff {
	case BackoffNone:
	case BackoffFixed, BackoffExponential:
		if c.BackoffInitialMs == 0 {
			bad("backoff %v needs an initial delay of at least 1 ms", c.Backoff)
		}
		if c.Backoff == BackoffExponential && c.BackoffMaxMs < c.BackoffInitialMs {
			bad("backoff max %d ms is below the initial %d ms", c.BackoffMaxMs, c.BackoffInitialMs)
		}
	default:
		bad("backoff %v is not none, fixed or exponential", c.Backoff)
	}
	return errors.Join(errs...)
}

// RetryDelay is the backoff policy's delay before retrying a message that has been delivered
// `attempts` times: none 0, fixed BackoffInitialMs, exponential
// min(BackoffMaxMs, BackoffInitialMs × 2^(attempts−1)) (attempts 0 is treated as 1).
func (c Config) RetryDelay(attempts uint32) uint64 {
	switch c.Backoff {
	case BackoffFixed:
		return c.BackoffInitialMs
	case BackoffExponential:
		shift := uint64(0)
		if attempts > 1 {
			shift = uint64(attempts - 1)
		}
		if shift >= 64 || c.BackoffInitialMs > c.BackoffMaxMs>>shift {
			return c.BackoffMaxMs
		}
		return c.BackoffInitialMs << shift
	default:
		return 0
	}
}

// ExtendDeadline computes the ExpiresAt of an ExtendLease received at now: now + extendByMs,
// with the extension capped at MaxLeaseExtensionMs. The cap is applied here, when the Extend
// command is made, never when it is applied or replayed.
func ExtendDeadline(now int64, extendByMs uint64) int64 {
	return addMs(now, min(extendByMs, MaxLeaseExtensionMs))
}

// addMs returns t + ms, saturating at math.MaxInt64.
func addMs(t int64, ms uint64) int64 {
	if ms > math.MaxInt64 || t > math.MaxInt64-int64(ms) {
		return math.MaxInt64
	}
	return t + int64(ms)
}
