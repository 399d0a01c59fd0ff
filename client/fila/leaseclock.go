package fila

import (
	"context"
	"time"
)

// leaseClock is the time the lease table keeps leases by: the system's, or a test's (so that a
// test moves time instead of waiting for it).
type leaseClock interface {
	Now() time.Time
	// At returns a channel that receives once the time is at or past t, and a function that
	// releases it early.
	At(t time.Time) (<-chan time.Time, func() bool)
	// WithDeadline is context.WithDeadline on this clock.
	WithDeadline(parent context.Context, t time.Time) (context.Context, context.CancelFunc)
}

// systemClock is the leaseClock of every client outside tests.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) At(t time.Time) (<-chan time.Time, func() bool) {
	timer := time.NewTimer(time.Until(t))
	return timer.C, timer.Stop
}

func (systemClock) WithDeadline(parent context.Context, t time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(parent, t)
}
