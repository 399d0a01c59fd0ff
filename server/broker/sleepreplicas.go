package broker

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftstore"
)

// Hibernation of a replicated group (the design is hibernate.go's; this is its cluster part).
//
//   - The leader, idle and drowsy, proposes a Hibernate command in an entry of its own
//     (proposeHibernate) instead of stopping at once.
//   - Every replica that applies it as its log's last entry sleeps (sleepAsked): a follower at
//     once, keeping a summary of the state it applied; the leader once its followers have heard
//     that the entry committed (the Network's CommitKnown, at most sleepHearTimeout: a follower
//     that is down will not), so that they apply it too. A replica whose log holds more after
//     it stays awake.
//   - A Raft message for a sleeping group reaches the broker (WakeGroup, through the node
//     link): a heartbeat or an empty AppendEntries of the term the group slept in that finds the
//     log as it is (the leader's last messages before it stopped) is answered for the sleeping
//     group; anything else wakes it, and the message waits until the group has reopened.
//   - A woken replica stands for election (raftgroup.Open), which wakes the others; a replica
//     that missed the entry (it was down) does the same when it starts.
//
// Nothing committed depends on the sleep: a sleeping replica is a stopped Raft member whose log,
// term and vote are in the store, and it reopens from them as after a restart.

// sleepNetwork is a Network that wakes the groups that sleep on this node (nodelink.Link, once
// its handler is the broker).
type sleepNetwork interface {
	// WakesGroups reports whether a Raft message for a group without a transport is handed to
	// the broker (WakeGroup).
	WakesGroups() bool
	// CommitKnown is the highest commit index this node's member of group, leading it, has told
	// node in an AppendEntries node accepted.
	CommitKnown(group string, node meta.NodeID) uint64
}

// sleepHearTimeout bounds how long a leader whose Hibernate entry committed waits for its
// followers to hear of the commit before it sleeps anyway (a follower that is down never does;
// raft tells them within one to two CommitTimeouts, queueCommitTimeout).
const sleepHearTimeout = 2 * time.Second

// sleepNet is the Network as a sleepNetwork, nil when it wakes no group (a single node, or a
// network that does not).
func (b *Broker) sleepNet() sleepNetwork {
	n, ok := b.opts.Cluster.Network.(sleepNetwork)
	if !ok || !n.WakesGroups() {
		return nil
	}
	return n
}

// replicated reports whether the group has other members than this node.
func (a *actor) replicated() bool { return len(a.replicas) > 1 }

// maySleepReplicated reports whether the group may hibernate as far as its replicas go: a group
// of this node alone always may, a replicated one over a network that wakes it.
func (a *actor) maySleepReplicated() bool { return !a.replicated() || a.b.sleepNet() != nil }

// sleep puts an idle, drowsy leader's group to sleep: a group of this node alone at once (true:
// the actor's goroutine ends); a replicated group's leader proposes Hibernate, and sleeps once
// it has applied it (sleepAsked).
func (a *actor) sleep() bool {
	if !a.replicated() {
		return a.hibernate()
	}
	if _, ok := a.summarize(); !ok {
		return false // it could not sleep: its followers must not either
	}
	a.st.Hibernate(a.now())
	a.round(nil) // Hibernate is the entry's first command (queuegroup.Hibernates)
	return false
}

// sleepAsked puts the group to sleep when an entry that asks it to has applied, is the log's
// last, and the replica may sleep; true when it sleeps (the actor's goroutine ends).
func (a *actor) sleepAsked() bool {
	if a.fsm == nil || a.fsm.sleepAt.Load() == 0 {
		return false
	}
	at := a.fsm.sleepAt.Swap(0)
	if at == 0 || a.g == nil || a.suspended || a.deleted || a.b.opts.IdleTimeout <= 0 || a.b.sleepNet() == nil {
		return false
	}
	if _, last := a.g.Stats(); last != at {
		return false // the log moved on: the group is not idle any more
	}
	if !a.leading {
		return a.hibernateFollower(at)
	}
	if !a.mayHibernate() || !a.drowsy() {
		return false
	}
	a.awaitFollowersHeard(at)
	a.dorm.mu.Lock()
	a.dorm.raft = sleepingLog{} // a leader answers nobody's AppendEntries while asleep
	a.dorm.mu.Unlock()
	return a.hibernate()
}

// awaitFollowersHeard waits until every follower has heard that the entry at index committed, at
// most sleepHearTimeout, or until something arrives for the actor (which then stays awake).
func (a *actor) awaitFollowersHeard(index uint64) {
	n := a.b.sleepNet()
	deadline := time.Now().Add(sleepHearTimeout)
	for _, id := range a.replicas {
		if id == a.b.nodeID() {
			continue
		}
		for n.CommitKnown(a.name, id) < index && time.Now().Before(deadline) {
			if a.ops.waiting() || a.internal.waiting() {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// hibernateFollower puts a follower's replica to sleep after it applied the Hibernate entry at
// at, its log's last: it stops the Raft group and keeps a summary of the applied state. It
// reports false when something arrived meanwhile, or the state is too large to sleep.
func (a *actor) hibernateFollower(at uint64) bool {
	f := a.fsm
	sum, ok := f.sleepSummary(at)
	if !ok {
		return false
	}
	settled, ok := a.fallAsleep(sum, false)
	if !ok {
		return false
	}

	g := a.g
	a.stopGroup()
	logs := g.Store()
	if last, err := logs.LastIndex(); err == nil && last == at {
		a.storeSummary(logs, sum, last)
	} // else an entry arrived as it stopped: the next start opens the group
	a.noteSleep(logs)
	f.release()
	a.fsm = nil
	close(settled)
	return true
}

// sleepSummary is the summary of a follower's applied state, when it applied the entry at at
// last and is small enough to sleep.
func (f *queueFSM) sleepSummary(at uint64) (summary, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leading.Load() || f.applied != at || f.state == nil {
		return summary{}, false
	}
	return summarizeState(f.state)
}

// release drops a stopped follower's state: nothing reads it any more.
func (f *queueFSM) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leading.Load() && f.state != nil {
		f.state.Release()
		f.state = nil
	}
}

// summarizeState describes st for its sleep, without its self-driven changes (the leader's);
// false when it is too large to (see summarize).
func summarizeState(st *queuegroup.State) (summary, bool) {
	var s summary
	stored := 0
	for l := range 2 {
		q := st.Lane(queuegroup.Lane(l))
		stored += q.Len()
		qs := q.Stats()
		if len(qs.Keys) > maxSummaryKeys || stored > maxSleepMessages {
			return summary{}, false
		}
		s.Lanes[l] = laneSummary{Stats: qs}
		s.Lanes[l].Oldest, s.Lanes[l].HasOldest = q.OldestReady()
	}
	return s, true
}

// sleepingLog is what a sleeping replica's Raft member would answer an AppendEntries from:
// its term and its log's last entry.
type sleepingLog struct {
	known      bool
	term, last uint64
	logs       raftstore.LogStableStore
}

// keyCurrentTerm is where hashicorp/raft stores its current term in the stable store.
var keyCurrentTerm = []byte("CurrentTerm")

// noteSleep records what the stopped group's store holds for answering its peers while asleep.
func (a *actor) noteSleep(logs raftstore.LogStableStore) {
	sl := sleepingLog{logs: logs}
	if term, err := logs.GetUint64(keyCurrentTerm); err == nil {
		if last, err := logs.LastIndex(); err == nil {
			sl.known, sl.term, sl.last = true, term, last
		}
	}
	a.dorm.mu.Lock()
	a.dorm.raft = sl
	a.dorm.mu.Unlock()
}

// WakeGroup is the node link's question about a Raft message for group, which has no open
// transport on this node (nodelink.Waker): answered for the group asleep when it changes nothing,
// else the group is woken (here: it is this node's; the message waits until it reopens).
func (b *Broker) WakeGroup(group string, req any) (resp any, answered, here bool) {
	r := b.lookup(group)
	if r.a == nil || r.a.name != group {
		return nil, false, false
	}
	a := r.a
	if ae, ok := req.(*raft.AppendEntriesRequest); ok && len(ae.Entries) == 0 {
		if resp := a.answerAsleep(ae); resp != nil {
			return resp, true, true
		}
	}
	a.poke()
	a.dorm.mu.Lock()
	defer a.dorm.mu.Unlock()
	return nil, false, a.dorm.life != lifeEnded
}

// answerAsleep is raft's answer to an AppendEntries without entries for the sleeping group, when
// it would change nothing: the same term, a previous entry the log holds, nothing more to commit.
// nil when the group must wake to answer.
func (a *actor) answerAsleep(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
	d := &a.dorm
	d.mu.Lock()
	defer d.mu.Unlock() // the group stays asleep while the answer is made: a poke waits
	if d.life != lifeAsleep || !closed(d.settled) {
		return nil
	}
	sl := &d.raft
	if !sl.known {
		return nil
	}
	if req.Term != sl.term || req.LeaderCommitIndex > sl.last || req.PrevLogEntry > sl.last {
		return nil
	}
	if req.PrevLogEntry != 0 {
		var l raft.Log
		if err := sl.logs.GetLog(req.PrevLogEntry, &l); err != nil || l.Term != req.PrevLogTerm {
			return nil
		}
	}
	self := a.b.nodeID()
	return &raft.AppendEntriesResponse{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self),
			Addr: []byte(a.b.opts.Cluster.Network.Address(self, a.name))},
		Term: sl.term, LastLog: sl.last, Success: true,
	}
}
