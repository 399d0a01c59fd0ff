package sandbox

import (
	"context"
	"time"
)

// budget is the context a State runs under: gopher-lua asks for Done before every instruction,
// and every checkEvery-th time budget compares the clock with the deadline. It allocates nothing
// per run (context.WithTimeout would arm a timer for each call).
type budget struct {
	deadline time.Time
	calls    uint32
	expired  bool
}

// checkEvery is how many instructions run between two clock reads. It is small because one
// instruction can double a string: a loop of s = s .. s must meet the clock before it has made
// more than a few doublings past the budget.
const checkEvery = 4

var (
	neverDone = make(chan struct{})
	allDone   = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
)

var _ context.Context = (*budget)(nil)

func (b *budget) start(timeout time.Duration) {
	b.deadline, b.calls, b.expired = time.Now().Add(timeout), 0, false
}

func (b *budget) Deadline() (time.Time, bool) { return b.deadline, true }

func (b *budget) Done() <-chan struct{} {
	if b.expired {
		return allDone
	}
	if b.calls++; b.calls%checkEvery == 0 && time.Now().After(b.deadline) {
		b.expired = true
		return allDone
	}
	return neverDone
}

func (b *budget) Err() error {
	if b.expired {
		return context.DeadlineExceeded
	}
	return nil
}

func (b *budget) Value(any) any { return nil }
