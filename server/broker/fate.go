package broker

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/raftgroup"
)

// The fate of a deposed leader's entries. When a queue leader loses its leadership, raft fails
// every proposal in flight. One that never reached the log (raft answered ErrNotLeader, or
// ErrLeadershipLost with no index) never applies: it is answered NotLeader, and the client (or
// the node that forwards it) may send it again. One that raft had appended (index i, its future
// failed ErrLeadershipLost) may still commit under the next leader, or be overwritten by it:
// answering NotLeader then would have the request carried out twice when it is sent again. So
// the round waits, bounded, until this node — now a follower — applies index i:
//
//   - the entry applied at i is the round's own (its Fence, unique to one entry of one leader's
//     epoch) and it applied: committed, the round is answered as it would have been (Ok, with
//     its results);
//   - another entry at i, or the round's entry fenced off: dropped, NotLeader;
//   - a snapshot restored past i (the entries it covers are not applied one by one), the bound
//     passed (no leader reachable, or this node far behind), or the group stopped: the outcome
//     is unknown, answered StorageError (errFateUnknown): the node cannot confirm the write is
//     durable, and a client must not take it as refused (docs/cluster.md).
//
// The state machine decides, in apply, on raft's apply goroutine: it knows which entry applied
// at each index. The actor's waiter registers the round (awaitFate) before it finishes the
// round, so before the actor demotes and hands the state back to the state machine; until the
// demotion the state machine checks fences only, and its last fence is the last of the deposed
// leader's entries that applied.

// errFateUnknown answers a round whose entry was in the log of a deposed leader that could not
// learn whether it committed.
var errFateUnknown = errors.New("broker: this node lost the queue's leadership with the request's entry in its log, " +
	"and could not learn whether the entry committed: it may or may not have been carried out")

// fateBound is how long a deposed leader waits to learn the fate of its entries, in heartbeat
// timeouts of the group (raftgroup's election timeout is two: so two election timeouts).
const fateBound = 4

// fateBoundFloor is the least fateBound waits (a test lowers the heartbeat timeout a lot).
const fateBoundFloor = 500 * time.Millisecond

// fateBoundSet replaces the bound when not zero (nanoseconds; tests).
var fateBoundSet atomic.Int64

type fateOutcome int

const (
	fatePending   fateOutcome = iota
	fateCommitted             // the entry applied at its index
	fateDropped               // another entry applied at its index, or it was fenced off
	fateUnknown               // a snapshot restored past it, or no answer within the bound
)

// fate is one proposal of a deposed leader waiting for its entry to apply (or not).
type fate struct {
	index uint64
	fence queuelog.Fence
	c     chan fateOutcome // buffered: the state machine never blocks on it
}

// lastFence is the fence of the last entry applied: the leader's chain while leading, the
// state's otherwise. Under f.mu.
func (f *queueFSM) lastFence() queuelog.Fence {
	if f.leading.Load() || f.state == nil {
		return f.fence
	}
	return f.state.Fence()
}

// awaitFate registers a proposal whose entry raft appended at index (fenced fence) and lost
// the leadership before it committed. It returns the outcome when it is known already, or a
// channel that will receive it.
func (f *queueFSM) awaitFate(index uint64, fence queuelog.Fence) (fateOutcome, *fate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.lastFence()
	switch {
	case last.Epoch == fence.Epoch && last.Seq >= fence.Seq:
		return fateCommitted, nil // it applied, or one of its epoch after it did
	case index <= f.restored:
		return fateUnknown, nil
	case f.applied >= index:
		return fateDropped, nil
	}
	x := &fate{index: index, fence: fence, c: make(chan fateOutcome, 1)}
	f.fates = append(f.fates, x)
	return fatePending, x
}

// forgetFate stops waiting for x; it returns the outcome decided meanwhile, if any.
func (f *queueFSM) forgetFate(x *fate) fateOutcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, y := range f.fates {
		if y == x {
			f.fates = append(f.fates[:i], f.fates[i+1:]...)
			break
		}
	}
	select {
	case o := <-x.c:
		return o
	default:
		return fatePending
	}
}

// decideFates settles the fates an entry just applied at l.Index decides. Under f.mu, on raft's
// apply goroutine; called only while some fate waits.
func (f *queueFSM) decideFates(l *raft.Log) {
	last := f.lastFence()
	kept := f.fates[:0]
	for _, x := range f.fates {
		switch {
		case x.index > l.Index:
			kept = append(kept, x)
			continue
		case x.index < l.Index: // a no-op or a configuration entry at its index: raft applies commands only
			x.c <- fateDropped
		case last == x.fence:
			x.c <- fateCommitted
		default:
			x.c <- fateDropped
		}
	}
	clear(f.fates[len(kept):])
	f.fates = kept
}

// restoredFates settles the fates a snapshot restored at index covers: unknown (every fate
// waiting when the snapshot does not say its index: known is false). Under f.mu.
func (f *queueFSM) restoredFates(index uint64, known bool) {
	if known {
		f.restored = max(f.restored, index)
	}
	kept := f.fates[:0]
	for _, x := range f.fates {
		if x.index <= index || !known {
			x.c <- fateUnknown
			continue
		}
		kept = append(kept, x)
	}
	clear(f.fates[len(kept):])
	f.fates = kept
}

// deposedEntry reports whether a round failed with its entry in the log of a leader deposed
// before it committed, and the entry's index.
// A node alone in its group loses the leadership only when its store failed (raft steps down
// after a failed append): those rounds answer StorageError at once, as before.
func (a *actor) deposedEntry(c *commit, err error) (uint64, bool) {
	if c.future == nil || !errors.Is(err, raft.ErrLeadershipLost) || !a.b.clustered() {
		return 0, false
	}
	i := c.future.Index()
	return i, i != 0
}

// settleDeposed answers a round whose entry was appended at index when the node lost the
// leadership, once its fate is known (see above). Runs on the waiter's goroutine; the answers
// may come later, from a goroutine of their own.
func (a *actor) settleDeposed(c *commit, index uint64) {
	a.awaitBodies(c)
	for i := range c.outbox {
		a.batches.put(c.outbox[i].deliveries) // the subscriptions end NotLeader with the demotion
	}
	if a.b.db.Health().Err != nil { // the store failed: the reload discards this state machine
		a.answerFate(c.replies, fateUnknown)
		return
	}
	o, x := a.fsm.awaitFate(index, c.fence)
	if o != fatePending {
		a.answerFate(c.replies, o)
		return
	}
	bound := max(fateBound*a.g.HeartbeatTimeout(), fateBoundFloor)
	if d := fateBoundSet.Load(); d != 0 {
		bound = time.Duration(d)
	}
	g, deadline := a.g, time.Now().Add(bound)
	go func() {
		tick := time.NewTicker(fateTick)
		defer tick.Stop()
		for {
			select {
			case o = <-x.c:
				a.answerFate(c.replies, o)
				return
			case <-tick.C:
			}
			if o = appliedFate(g, index); o == fatePending && time.Now().After(deadline) {
				o = fateUnknown
			}
			if o == fatePending {
				continue
			}
			if d := a.fsm.forgetFate(x); d != fatePending {
				o = d // decided meanwhile
			}
			a.answerFate(c.replies, o)
			return
		}
	}()
}

// fateTick is how often a deposed leader's waiting round looks at the group's applied index.
const fateTick = 10 * time.Millisecond

// appliedFate is what the group's raft tells of index: dropped when it applied index and the
// entry there is not a command (raft hands the state machine commands only, so a no-op or a
// configuration entry the next leader wrote at a deposed leader's index is seen here), unknown
// when the group stopped (a reload, or the node closing: this state machine decides nothing
// more), pending otherwise.
func appliedFate(g *raftgroup.Group, index uint64) fateOutcome {
	switch err := g.AwaitApplied(index, 0); {
	case errors.Is(err, raftgroup.ErrShutdown):
		return fateUnknown
	case err != nil:
		return fatePending
	}
	var l raft.Log
	if g.Store().GetLog(index, &l) == nil && l.Type != raft.LogCommand {
		return fateDropped
	}
	return fatePending
}

// answerFate answers a deposed leader's round as its entry's fate says.
func (a *actor) answerFate(replies []func(error), o fateOutcome) {
	var err error
	switch o {
	case fateCommitted:
		err = nil
	case fateDropped:
		err = errNotLeader
	default:
		err = errFateUnknown
	}
	a.fsm.fateTally[o].Add(1)
	a.log.Info("a request of the deposed leader settled by its entry's fate", "fate", o.String(), "requests", len(replies))
	for _, reply := range replies {
		reply(err)
	}
}

func (o fateOutcome) String() string {
	switch o {
	case fateCommitted:
		return "committed"
	case fateDropped:
		return "dropped"
	case fateUnknown:
		return "unknown"
	}
	return "pending"
}
