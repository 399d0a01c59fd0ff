package storage

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrWritesFailing is what every write returns while the store does not accept writes (the disk
// is full, read-only or failing). Errors wrapping it name the first failure. Reads go on.
var ErrWritesFailing = errors.New("storage: writes are failing")

// WriteError is the error of a write refused or failed while the store does not accept writes.
type WriteError struct {
	Cause error     // the first failure
	Since time.Time // when writes started failing
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("storage: writes are failing since %s: %v", e.Since.UTC().Format(time.RFC3339), e.Cause)
}

func (e *WriteError) Unwrap() []error { return []error{ErrWritesFailing, e.Cause} }

// health says whether a store accepts writes. A store stops accepting them at its first failed
// write and accepts them again once its recovery (DB.recoverLoop) has seen writes succeed.
type health struct {
	mu      sync.Mutex
	failing *WriteError   // nil while writes are accepted
	changed chan struct{} // closed and replaced at every change
	// failures counts failed writes, refused ones included.
	failures atomic.Int64
}

func newHealth() *health { return &health{changed: make(chan struct{})} }

// state returns nil when writes are accepted, else the *WriteError, and a channel closed at the
// next change.
func (h *health) state() (error, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing == nil {
		return nil, h.changed
	}
	return h.failing, h.changed
}

// err returns nil when writes are accepted, else the *WriteError.
func (h *health) err() error {
	err, _ := h.state()
	return err
}

// fail records a failed write; it reports whether the store was accepting writes until now.
func (h *health) fail(cause error) bool {
	h.failures.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing != nil {
		return false
	}
	h.failing = &WriteError{Cause: cause, Since: time.Now()}
	h.notify()
	return true
}

// recovered makes the store accept writes again.
func (h *health) recovered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing != nil {
		h.failing = nil
		h.notify()
	}
}

func (h *health) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// Health is what a Store reports about its writes.
type Health struct {
	// Err is nil while writes are accepted, else a *WriteError (errors.Is ErrWritesFailing).
	Err error
	// Changed is closed at the next change of Err.
	Changed <-chan struct{}
	// Failures counts the writes that failed or were refused so far.
	Failures int64
}

func (h *health) report() Health {
	err, ch := h.state()
	return Health{Err: err, Changed: ch, Failures: h.failures.Load()}
}
