// Package backoff is the delay between reconnect attempts that both SDKs (fila and rift) use.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is the delay before each reconnect attempt: Initial·2ⁿ capped at Max, with "equal
// jitter" — a uniform draw in [d/2, d) — so that clients restarted together spread out.
type Backoff struct {
	Initial, Max time.Duration
	Rand         func() float64 // [0, 1); RandFloat in production, fixed values in tests
}

// Delay is the wait before attempt n (0-based) of an outage.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + time.Duration(b.Rand()*float64(d-half))
}

// RandFloat is a uniform draw in [0, 1).
func RandFloat() float64 { return rand.Float64() }
