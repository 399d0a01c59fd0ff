// Package lograte bounds the log lines of an event that clients can cause at will, such as a
// failed authentication: at most one line per interval, each saying how many events were held
// back since the line before it. Without it, a client that retries a wrong key in a loop writes
// the log as fast as it can connect.
package lograte

import (
	"sync"
	"time"
)

// Limiter lets one event per interval be logged. Safe for concurrent use.
type Limiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	next time.Time // no line before this
	held int       // events since the last line that got none
}

// New returns a Limiter of one line per every, reading time from now (time.Now when nil).
func New(every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{every: every, now: now}
}

// Allow records an event and reports whether it may be logged; when it may, held counts the
// events before it that were not, since the previous line.
func (l *Limiter) Allow() (ok bool, held int) {
	t := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.Before(l.next) {
		l.held++
		return false, 0
	}
	l.next = t.Add(l.every)
	held, l.held = l.held, 0
	return true, held
}
