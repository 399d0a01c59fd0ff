package sandbox

import (
	"context"
	"runtime"
	"time"
)

// budget is the context a State runs under: gopher-lua asks for Done before every instruction,
// and every checkEvery-th time budget compares the clock with the deadline. It allocates nothing
// per run (context.WithTimeout would arm a timer for each call).
//
// The budget is CPU time, so that a script is not timed out because a loaded machine did not
// schedule it: the cheap wall clock is read between instructions, and only when the wall
// deadline has passed is the thread's CPU clock asked (the run is locked to its OS thread). If the
// run has used less CPU than its budget, the wall deadline moves by what is left. Where no thread
// CPU clock exists, the budget is wall-clock time.
type budget struct {
	limit    time.Duration
	deadline time.Time
	cpuStart time.Duration
	hasCPU   bool
	calls    uint32
	expired  bool
	locked   bool
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
	if !b.locked {
		runtime.LockOSThread()
		b.locked = true
	}
	b.limit, b.deadline, b.calls, b.expired = timeout, time.Now().Add(timeout), 0, false
	b.cpuStart, b.hasCPU = threadCPU()
}

// stop releases the thread start locked.
func (b *budget) stop() {
	if b.locked {
		runtime.UnlockOSThread()
		b.locked = false
	}
}

func (b *budget) Deadline() (time.Time, bool) { return b.deadline, true }

func (b *budget) Done() <-chan struct{} {
	if b.expired {
		return allDone
	}
	if b.calls++; b.calls%checkEvery == 0 {
		if now := time.Now(); now.After(b.deadline) {
			b.check(now)
		}
	}
	if b.expired {
		return allDone
	}
	return neverDone
}

// check runs when the wall deadline has passed: the run has expired if its CPU time has too.
func (b *budget) check(now time.Time) {
	if !b.hasCPU {
		b.expired = true
		return
	}
	cpu, ok := threadCPU()
	used := cpu - b.cpuStart
	if !ok || used >= b.limit {
		b.expired = true
		return
	}
	b.deadline = now.Add(b.limit - used)
}

func (b *budget) Err() error {
	if b.expired {
		return context.DeadlineExceeded
	}
	return nil
}

func (b *budget) Value(any) any { return nil }
