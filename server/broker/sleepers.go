package broker

import (
	"container/heap"
	"sync"
	"time"
)

// sleepers wakes hibernating queue groups at their next self-driven change (a delayed message
// coming due, a lease ending, a retry, a dedup window closing, parked messages to classify
// again): one goroutine and one timer for every sleeping group of the broker, not one each.
//
// Each actor has at most one entry, at the time its summary names; schedule moves it and
// cancel removes it. When an entry comes due, the actor is poked: it wakes, its first round does
// what came due, and it falls asleep again once idle.
type sleepers struct {
	mu    sync.Mutex
	h     wakeHeap
	kick  chan struct{} // the earliest entry changed
	stop  chan struct{}
	done  chan struct{}
	clock func() time.Time
}

// wakeEntry is one sleeping actor's wake-up.
type wakeEntry struct {
	a  *actor
	at int64 // Unix ms
}

// wakeHeap is a min-heap of wake-ups by time; each actor's index in it is a.wakeIdx.
type wakeHeap []wakeEntry

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].a.wakeIdx, h[j].a.wakeIdx = i+1, j+1
}
func (h *wakeHeap) Push(x any) {
	e := x.(wakeEntry)
	e.a.wakeIdx = len(*h) + 1
	*h = append(*h, e)
}
func (h *wakeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = wakeEntry{}
	*h = old[:len(old)-1]
	e.a.wakeIdx = 0
	return e
}

func newSleepers(clock func() time.Time) *sleepers {
	return &sleepers{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), clock: clock}
}

// schedule makes a wake a at Unix ms at (replacing its earlier wake-up, if any).
func (s *sleepers) schedule(a *actor, at int64) {
	s.mu.Lock()
	if a.wakeIdx != 0 {
		s.h[a.wakeIdx-1].at = at
		heap.Fix(&s.h, a.wakeIdx-1)
	} else {
		heap.Push(&s.h, wakeEntry{a: a, at: at})
	}
	first := s.h[0].a == a
	s.mu.Unlock()
	if first {
		signal(s.kick)
	}
}

// cancel removes a's wake-up, if it has one.
func (s *sleepers) cancel(a *actor) {
	s.mu.Lock()
	if a.wakeIdx != 0 {
		heap.Remove(&s.h, a.wakeIdx-1)
	}
	s.mu.Unlock()
}

// due pops the entries due at now and returns the time of the next one (ok false: none).
func (s *sleepers) due(now int64, dst []*actor) (_ []*actor, next int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.h) > 0 && s.h[0].at <= now {
		dst = append(dst, heap.Pop(&s.h).(wakeEntry).a)
	}
	if len(s.h) > 0 {
		return dst, s.h[0].at, true
	}
	return dst, 0, false
}

// run pokes each actor whose wake-up has come, until close.
func (s *sleepers) run(newTimer func(time.Duration) Timer) {
	defer close(s.done)
	t := newTimer(time.Hour)
	defer t.Stop()
	var woken []*actor
	for {
		now := s.clock().UnixMilli()
		var next int64
		var ok bool
		woken, next, ok = s.due(now, woken[:0])
		for _, a := range woken {
			a.poke()
		}
		clear(woken)
		d := time.Hour
		if ok {
			d = max(time.Duration(next-now)*time.Millisecond, 0)
		}
		t.Reset(d)
		select {
		case <-t.C():
		case <-s.kick:
		case <-s.stop:
			return
		}
	}
}

func (s *sleepers) close() {
	close(s.stop)
	<-s.done
}
