package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
)

// Roles: this node's replica of a queue group leads it or follows, as the group's Raft elections
// decide, and the actor runs the leader's runtime only while it leads.
//
//   - Promotion (the node became the leader, and has applied every committed entry: a barrier):
//     the actor takes the applied state from the state machine (queueFSM.take), starts a new
//     epoch of the group's fence in its Raft term (queuegroup.State.Lead), and from then on
//     decides, records and proposes, as actor.go describes.
//   - Demotion (the node lost the leadership, or a proposal failed because it did): the actor
//     waits for the rounds in flight (a round whose entry raft had appended is answered by that
//     entry's fate, fate.go; one that never reached the log NotLeader), answers what waits
//     NotLeader, ends every subscription with
//     NotLeader, and hands the state back (queueFSM.demote), which drops what the actor decided
//     beyond the applied log and rebuilds the state from the snapshot and the log. The replica
//     then applies the new leader's entries like any follower.
//
// Both run on the actor's goroutine between rounds, driven by hashicorp/raft's observations
// (watchRole), so no operation of a round sees the role change under it: a
// change of role is a normal event, not a storage failure, and never reopens the group. A group
// of this node alone leads from its start until it stops.

// errNotLeader answers what a deposed leader had in flight, and requests for a group this node
// follows.
var errNotLeader = errors.New("broker: this node no longer leads the queue")

// leadershipLost reports whether a proposal failed because the node does not lead the group
// (any more): the entry may still commit under the next leader, or never.
func leadershipLost(err error) bool {
	return errors.Is(err, errNotLeader) || errors.Is(err, errFenced) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// failureCode is the code answering a request whose proposal failed with err: NotLeader when
// the node lost the leadership, StorageError when the store failed (raft steps down after a
// failed append too, so the proposals behind that one fail as if deposed: while the store refuses
// writes they answer StorageError, and the storage path reloads the group, storagehealth.go).
func (b *Broker) failureCode(err error) Code {
	if errors.Is(err, errNoMetaLeader) {
		return CodeNodeNotReady
	}
	if leadershipLost(err) && b.db.Health().Err == nil {
		return CodeNotLeader
	}
	return CodeStorageError
}

// failure is failureCode's error, with err's text.
func (b *Broker) failure(err error) *Error {
	return errorf(b.failureCode(err), "%v", err)
}

// settleRole waits until the group's role is known after it opened, then promotes the actor
// when this node leads; a follower's state stays with the state machine.
func (a *actor) settleRole() error {
	leader, err := a.g.AwaitRole(a.b.roleTimeout(a.name)) // shorter for a joining replica (membership.go)
	if err != nil {
		return err
	}
	if leader {
		return a.promote()
	}
	// A follower: AwaitRole knows another leader.
	a.noteLeader(false)
	if a.leading { // a group reopened (a reload) where another node now leads
		a.leading = false
		a.leadingNow.Store(false)
		a.endSubscriptions(a.deposed())
		a.bodies.clear()
		a.countDedup(0)
		if a.st != nil {
			a.st.Release()
			a.st = nil
		}
	}
	a.follow()
	return nil
}

// retake demotes the actor and promotes it again if this node still leads: after a proposal of
// its was fenced off by another leader's entries, which its state lacks.
func (a *actor) retake() {
	if !a.leading || a.g == nil || a.suspended || a.deleted {
		return
	}
	a.demote()
	a.followRole()
}

// follow has raft snapshot the replica by itself while it follows: its state machine's snapshots
// read the log, not the live state (fsmsnapshot.go), so they may be taken at any point, and
// nobody else truncates a follower's log.
func (a *actor) follow() {
	if err := a.g.AutoSnapshot(followerSnapshotEntries); err != nil {
		a.log.Warn("setting the replica's snapshot schedule failed", "err", err)
	}
}

// A follower's raft snapshots once its log holds followerSnapshotEntries entries past its last
// snapshot, looking every followerSnapshotCheck (raft adds up to as much again at random).
// Variables so that tests can lower them.
var (
	followerSnapshotEntries uint64 = snapshotEntries
	followerSnapshotCheck          = 30 * time.Second
)

// watchRole starts relaying the group's role changes to the actor's run loop; stopGroup ends it.
func (a *actor) watchRole() {
	changed, stop := a.g.Watch()
	a.unwatch = stop
	go func() {
		for range changed {
			signal(a.roleChanged)
		}
	}()
}

// followRole brings the actor in line with the group's current role.
func (a *actor) followRole() {
	if err := a.b.db.Health().Err; err != nil {
		a.standDown(err) // elected while the store refuses writes: let a replica that can write lead
	}
	if a.g == nil || a.suspended || a.deleted || a.b.db.Health().Err != nil {
		// Stopped, or about to be: the reload or resume that reopens the group settles the
		// role (a failed append steps raft down; that is the store's failure, not a
		// successor's election: storagehealth.go).
		return
	}
	leader, term := a.g.Leader(), a.g.Term()
	a.noteLeader(leader)
	if a.leading && (!leader || term != a.term) {
		a.demote() // deposed (perhaps elected again since, in a later term: promoted below)
	}
	if !a.leading && leader {
		if err := a.promote(); err != nil {
			a.demote()
			if errors.Is(err, raft.ErrLeadershipTransferInProgress) {
				// A transfer of this node's leadership is under way (a retake after a round it
				// refused, finish): look again shortly, as raft tells no change when it fails.
				a.log.Debug("the queue's leadership is being handed on; following until the transfer ends", "err", err)
				time.AfterFunc(transferRecheck, func() { signal(a.roleChanged) })
				return
			}
			a.log.Warn("taking over the queue's leadership failed; following", "err", err)
		}
	}
}

// transferRecheck is how often a leader whose leadership is being handed on looks whether the
// transfer ended (raft refuses proposals meanwhile: its state cannot be taken over).
const transferRecheck = 20 * time.Millisecond

// promote starts the leader's runtime on the applied state. The caller knows this node leads.
func (a *actor) promote() error {
	if err := a.g.Barrier(leadTimeout); err != nil {
		return err
	}
	if err := a.g.AutoSnapshot(0); err != nil { // the leader snapshots at points it chooses (maybeSnapshot)
		return err
	}
	a.term = a.g.Term()
	old := a.st
	a.st = a.fsm.take()
	if old != nil && old != a.st {
		old.Release() // a reload's discarded state: nothing reads it (snapshots build their own)
	}
	a.countDedup(a.st.Remembered())
	a.st.Lead(a.term)
	a.st.Record(true)
	a.commits = make(chan *commit, 64)
	a.synced = make(chan struct{})
	go a.waitLoop()
	now := a.now()
	a.unconfirmed = false
	known := a.confirmDefinitions() // reclaim.go
	a.unconfirmed = !known          // its leases logged until confirmLater confirms the definitions
	for l := range a.lanes {
		a.syncConfig(queuegroup.Lane(l))
	}
	a.loadHooks()
	a.reclass = reclassState{}
	if a.st.Lane(queuegroup.LaneQueue).Unclassified() > 0 {
		a.parked(now)
	}
	a.graceFrom = a.reclaimFrom(now)
	if until := addMs(a.graceFrom, a.reclaimGrace()); (!a.committed(queuegroup.LaneQueue) || !known) && until > now {
		// Fast delivery durability (or a committed definition not confirmed current yet: the
		// queue may have been made fast): leases were not logged, so any message ready now may
		// have been delivered by the previous leader (or before the restart). Hold them for the
		// reclaim grace (clustering.md); a group first opened later, or woken from hibernation
		// (which it never enters with fast leases out), holds them for what is left of it.
		a.st.Lane(queuegroup.LaneQueue).Hold(now, until)
	}
	a.promotions++
	a.leading = true
	a.leadingNow.Store(true)
	if !known {
		a.confirmLater(a.term, false) // reclaim.go
	}
	return nil
}

// demote stops the leader's runtime and hands the state back to the state machine, which
// rebuilds it as of the applied log.
func (a *actor) demote() {
	if !a.leading {
		return
	}
	a.leading = false
	a.leadingNow.Store(false)
	a.unconfirmed = false
	a.drain()
	close(a.commits)
	<-a.synced
	for _, reply := range a.replies {
		reply(errNotLeader)
	}
	a.replies, a.outbox = nil, nil
	a.ops.refuseWaiting(CodeNotLeader)
	a.endSubscriptions(a.deposed())
	a.bodies.clear()
	a.countDedup(0)
	a.st.Release() // what the leader decided: nothing reads it any more (snapshots build their own)
	a.st = nil
	a.follow()
	if err := a.fsm.demote(); err != nil {
		// The replica cannot follow without its state: stop its group so that it takes no part
		// in the group's elections; the next start replays it.
		a.log.Error("rebuilding the queue's state after losing its leadership failed; stopping its replica", "err", err)
		a.stopGroup()
	}
	a.log.Info("no longer leads the queue", "term", a.term)
}

// endSubscriptions ends every subscription, telling each why.
func (a *actor) endSubscriptions(why *Error) {
	for id, sub := range a.subs {
		if sub.throttles != nil {
			sub.throttles.Close()
		}
		sub.sink.Ended(why)
		delete(a.subs, id)
	}
}

// Leads reports whether this node leads queue's group now (false for a queue it does not have).
func (b *Broker) Leads(queue string) bool {
	r := b.lookup(queue)
	return r.a != nil && r.a.leadingNow.Load()
}

// Replicates reports whether this node holds a replica of queue's group, its leader included.
func (b *Broker) Replicates(queue string) bool { return b.lookup(queue).a != nil }

// TransferLeadership hands the leadership of queue's group to node to (any other voter when
// to is empty) and waits until it has taken over. The node must lead the group.
func (b *Broker) TransferLeadership(queue string, to raft.ServerID, addr raft.ServerAddress) error {
	r := b.lookup(queue)
	if r.a == nil {
		return fmt.Errorf("queue %q does not exist", queue)
	}
	var g *raftgroup.Group
	if !r.a.call(func(a *actor) { g = a.g }) || g == nil {
		return fmt.Errorf("queue %q is not running here", queue)
	}
	return g.TransferLeadership(to, addr)
}
