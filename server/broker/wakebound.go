package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// A request for a sleeping replicated group wakes it (hibernate.go): the woken replica opens its
// Raft group and stands for election, which wakes the other replicas (sleepreplicas.go), and the
// request waits in the inbox until the group knows its role. That takes about an election (a
// second on a loaded machine) when the other replicas answer; when they do not (down, cut off,
// or a thousand groups waking at once on a busy node), open waits up to leadTimeout — a minute —
// before it fails and the requests are answered, and a Consume, which runs on the actor, waits
// until an open succeeds however long that takes: frames left unanswered, the client's window
// held. So a woken replicated group's requests wait at most wakeAnswerBound: past it, the ones
// waiting and the ones that arrive while the group still opens are answered NodeNotReady (no
// leader known yet: the client retries, here or on the node a route names), and the open goes on.

// wakeAnswerBound is how long a request waits for a woken replicated group to learn its role.
// A variable so that tests can lower it.
var wakeAnswerBound = 5 * time.Second

// wakeBound is an actor's side of that bound: whether its current open has passed the bound,
// and the calls waiting on the actor to abandon when it does.
type wakeBound struct {
	mu      sync.Mutex
	stalled bool
	next    int
	waiting map[int]func()
}

// stall marks the open as past the bound and abandons every call waiting.
func (w *wakeBound) stall() {
	w.mu.Lock()
	w.stalled = true
	waiting := w.waiting
	w.waiting = nil
	w.mu.Unlock()
	for _, abandon := range waiting {
		abandon()
	}
}

// settle ends a stall: the open finished (or failed; the next attempt is bounded afresh).
func (w *wakeBound) settle() {
	w.mu.Lock()
	w.stalled = false
	w.mu.Unlock()
}

// add registers abandon to run when the open passes the bound (at once while it is past it);
// the key removes it.
func (w *wakeBound) add(abandon func()) int {
	w.mu.Lock()
	if w.stalled {
		w.mu.Unlock()
		abandon()
		return -1
	}
	w.next++
	k := w.next
	if w.waiting == nil {
		w.waiting = map[int]func(){}
	}
	w.waiting[k] = abandon
	w.mu.Unlock()
	return k
}

func (w *wakeBound) remove(k int) {
	w.mu.Lock()
	delete(w.waiting, k)
	w.mu.Unlock()
}

// boundWake starts bounding the requests of a woken replicated group while it opens; the function
// it returns stops it once open has returned. A group of this node alone opens at once.
func (a *actor) boundWake() (stop func()) {
	if !a.b.clustered() || !a.replicated() {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	bound := wakeAnswerBound
	go func() {
		defer close(finished)
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
		a.log.Warn("the woken queue has no leader yet; answering its requests NodeNotReady while it opens", "after", bound)
		a.wakeB.stall()
		for {
			a.ops.refuseWaiting(CodeNodeNotReady)
			select {
			case <-done:
				return
			case <-a.ops.wake:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		a.wakeB.settle()
		signal(a.ops.wake) // a wake-up the watcher took may belong to a request it left waiting
	}
}

// callWaking is call for a request that may wake the group: false, true when the group's open
// passed wakeAnswerBound before f could run (f then never runs).
func (a *actor) callWaking(f func(a *actor)) (ok, notReady bool) {
	const pending, running, abandoned = 0, 1, 2
	var state atomic.Int32
	ch := make(chan bool, 1)
	k := a.wakeB.add(func() {
		if state.CompareAndSwap(pending, abandoned) {
			close(ch)
		}
	})
	defer a.wakeB.remove(k)
	a.post(func(a *actor) {
		if !state.CompareAndSwap(pending, running) {
			return // answered NodeNotReady already
		}
		if !a.leading {
			ch <- false // a follower holds no state to run f on (roles.go)
			return
		}
		f(a)
		ch <- true
	})
	select {
	case ok, open := <-ch:
		return ok, !open
	case <-a.done:
		return false, false
	}
}
