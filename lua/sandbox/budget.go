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
// deadline has passed is the thread's CPU clock asked (the run holds its OS thread, see Thread).
// If the run has used less CPU than its budget, the wall deadline moves by what is left. Where no
// thread CPU clock exists, the budget is wall-clock time.
type budget struct {
	limit    time.Duration
	deadline time.Time
	thread   *Thread
	// credit is the wall time from the thread's last CPU clock reading to the start of this run:
	// the CPU the thread used before the run is at most that.
	credit  time.Duration
	calls   uint32
	expired bool
	// bytes is what the run's library calls have allocated (charge), against maxBytes.
	bytes, maxBytes int
	own             Thread // the thread a Start outside a Hold holds for its run
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

// start begins a run's budget on t (nil: the budget's own thread, held until stop).
func (b *budget) start(t *Thread, timeout time.Duration) {
	if t == nil {
		t = &b.own
		t.Hold()
	}
	now := time.Now()
	t.refresh(now, timeout/maxCreditShare)
	b.thread, b.limit, b.deadline, b.calls, b.expired, b.bytes = t, timeout, now.Add(timeout), 0, false, 0
	b.credit = now.Sub(t.at)
}

// stop ends the run's budget (and releases the budget's own thread).
func (b *budget) stop() {
	if b.thread == &b.own {
		b.own.Release()
	}
	b.thread = nil
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

// over reports whether the run has used its budget, reading the clock now: the library
// functions that loop in Go ask it every few thousand steps. Outside a run it is false.
func (b *budget) over() bool {
	if b.expired || b.thread == nil {
		return b.expired
	}
	if now := time.Now(); now.After(b.deadline) {
		b.check(now)
	}
	return b.expired
}

// charge counts n bytes that a library call is about to allocate; false if that would exceed
// the run's byte budget (nothing is then counted). Outside a run nothing is counted.
func (b *budget) charge(n int) bool {
	if b.thread == nil {
		return true
	}
	if n < 0 || n > b.maxBytes-b.bytes {
		return false
	}
	b.bytes += n
	return true
}

// check runs when the wall deadline has passed: the run has expired if its CPU time has too.
// The run's CPU time is at least the thread's since its last reading less the credit.
func (b *budget) check(now time.Time) {
	t := b.thread
	if !t.hasCPU {
		b.expired = true
		return
	}
	cpu, ok := ThreadCPU()
	used := cpu - t.cpu - b.credit
	if !ok || used >= b.limit {
		b.expired = true
		return
	}
	b.deadline = now.Add(b.limit - max(used, 0))
}

func (b *budget) Err() error {
	if b.expired {
		return context.DeadlineExceeded
	}
	return nil
}

func (b *budget) Value(any) any { return nil }

// maxCreditShare bounds the credit of a run to its budget divided by it: a run may use at most
// that much CPU beyond its budget before it ends (1/8: 11.25 ms of CPU for a 10 ms budget).
const maxCreditShare = 8

// A Thread is the OS thread a series of runs holds, and a reading of its CPU clock: the runs
// started on it (State.StartOn) between Hold and Release need not each read the clock (a system
// call) to know the CPU time they use. A run's CPU time is measured from the last reading, less
// the wall time between that reading and the run's start (the thread cannot have used more
// CPU than that in between); the clock is read again at a start once that wall time would
// exceed an eighth of the run's budget. The zero Thread is ready for Hold; a Thread is used by
// one goroutine.
type Thread struct {
	held   bool
	hasCPU bool
	cpu    time.Duration // the thread's CPU clock at the last reading
	at     time.Time     // the wall clock just before that reading
}

// Hold locks the calling goroutine to its OS thread and reads the thread's CPU clock.
func (t *Thread) Hold() {
	if !t.held {
		runtime.LockOSThread()
		t.held = true
	}
	t.read(time.Now())
}

// Release unlocks the goroutine from its thread.
func (t *Thread) Release() {
	if t.held {
		runtime.UnlockOSThread()
		t.held = false
	}
}

func (t *Thread) read(now time.Time) {
	t.at = now
	t.cpu, t.hasCPU = ThreadCPU()
}

// refresh reads the CPU clock again when the last reading is more than maxCredit old.
func (t *Thread) refresh(now time.Time, maxCredit time.Duration) {
	if t.hasCPU && now.Sub(t.at) > maxCredit {
		t.read(now)
	}
}
