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
	// stuck: the store cannot recover in this process (DB.stick); failing stays set for good.
	stuck bool
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

// stick records a failure the store cannot recover from in this process; it reports whether it
// is the first such.
func (h *health) stick(cause error) bool {
	h.failures.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stuck {
		return false
	}
	h.stuck = true
	if h.failing == nil {
		h.failing = &WriteError{Cause: cause, Since: time.Now()}
	}
	h.notify()
	return true
}

// isStuck reports whether stick was called.
func (h *health) isStuck() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stuck
}

// recovered makes the store accept writes again, unless it is stuck.
func (h *health) recovered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing != nil && !h.stuck {
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
	// Stuck: the store refuses writes for good and cannot be closed or reopened in this process
	// (a commit failed inside Pebble and left its commit pipeline locked, guard.go). Only a new
	// process opens the directory again; what was acknowledged is in its WAL. The server should
	// exit so that its supervisor restarts it.
	Stuck bool
}

func (h *health) report() Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	if h.failing != nil {
		err = h.failing
	}
	return Health{Err: err, Changed: h.changed, Failures: h.failures.Load(), Stuck: h.stuck}
}
