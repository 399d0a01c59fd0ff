// Package gcfloor keeps Go's garbage collector from running every few megabytes while the live
// heap is small.
//
// With Go's default GOGC=100, the next collection is due once the heap has grown by as much as
// is live. A broker at light load has a live heap of a few MiB and allocates about 10 KB per
// message it handles, so it collects every couple of hundred messages; each collection stops the
// world twice and runs its mark workers on one of the machine's cores for about a millisecond,
// which is where the tail of a light-load round trip went (issue 15). Go has no minimum heap
// goal, so after every collection this package sets GOGC to what makes the next goal the floor,
// and back to 100 once half the floor is live: a heap larger than that is collected exactly as
// with Go's defaults, and GOMEMLIMIT still bounds the whole.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// defaultPercent is Go's GOGC default, kept for heaps of half the floor and more.
const defaultPercent = 100

// Percent is the GOGC that makes the next heap goal floor bytes when live bytes are live:
// Go's goal is live × (1 + GOGC/100).
func Percent(live, floor uint64) int {
	if live == 0 || 2*live >= floor {
		return defaultPercent
	}
	return int((floor - live) * 100 / live)
}

// Start keeps the heap goal at floor bytes or more from the next collection on, unless GOGC is
// set in the environment (the operator's choice stands). stop ends it and restores GOGC=100.
func Start(floor uint64) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set || floor == 0 {
		return func() {}
	}
	t := &tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopped = true
		debug.SetGCPercent(defaultPercent)
	}
}

type tuner struct {
	floor   uint64
	sample  []metrics.Sample
	mu      sync.Mutex // orders after with stop
	last    int
	stopped bool
}

// arm has after run once the next collection has found a sentinel unreachable: finalizers run
// on one goroutine after the collection that freed their object, so after sees its live heap.
// The sentinel holds a pointer, which keeps it out of the tiny allocator's shared blocks (whose
// finalizers may never run).
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t}, func(s *sentinel) { s.t.after() })
}

type sentinel struct{ t *tuner }

func (t *tuner) after() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		if p := Percent(t.sample[0].Value.Uint64(), t.floor); p != t.last {
			debug.SetGCPercent(p)
			t.last = p
		}
	}
	t.arm()
}
