package broker

import (
	"time"

	"github.com/filamq/fila/server/queuegroup"
)

// The reclaim grace of fast delivery durability (clustering.md): a leader of a fast queue keeps
// its leases in memory only, so a node that takes the leadership over cannot know which messages
// were leased, and holds every message that is pending then (engine.Queue.Hold) for the queue's
// reclaim grace. When the grace starts depends on who may have leased them:
//
//   - another leader, or this node in an earlier leadership: the grace starts at the takeover;
//   - this node's previous process (a restart, the group's leadership never seen elsewhere since
//     the replica opened): the grace started with the node, so a group opened or woken later
//     holds them for what is left of it. A group hibernates only with no fast lease out, so a
//     woken group whose first leader is this node holds nothing back.
//
// A replica that saw another node lead (it followed a known leader) counts that leader's leases,
// whatever happens next: a follower that wins the election after the leader died takes over.

// noteLeader records, when this node does not lead, whether the group knows another leader.
func (a *actor) noteLeader(leader bool) {
	if !leader && a.g != nil && a.g.LeaderID() != "" {
		a.othersLed = true
	}
}

// reclaimFrom is when the reclaim grace of a promotion at now starts.
func (a *actor) reclaimFrom(now int64) int64 {
	if a.promotions > 0 || a.othersLed {
		return now // a takeover after another leader: its leases are unknown from now on
	}
	return a.b.started
}

// A takeover decides whether to hold by the queue's delivery durability, and a follower may not
// have heard the latest: the registry hands it changed definitions a moment after its meta state
// applied them, and its meta state applies an entry a commit-index round after the meta leader
// committed it — longer when that leader died with the queue's. A follower promoted a second
// after an UpdateQueue made its queue fast ran it as committed, held nothing, and redelivered at
// once what its predecessor had leased in memory (TestClusterFastLeasesAreHeldForTheReclaimGrace
// failed 3 runs of 8). So a takeover reads the definitions from the meta state, and one that
// finds the queue committed confirms the meta state current (metaConfirmed, as a QueueNotFound is
// confirmed: metafresh.go) beside the actor: the new leader serves at once, as the more careful
// of the two modes — it holds what was ready at the takeover, as a fast queue does, and logs its
// leases, as a committed queue does (unconfirmed) — and once the meta state is confirmed it runs
// the definition it then reads, ending the hold of a queue that is committed after all; it asks
// again until it can. (The takeover used to wait for the confirmation before serving, at most
// 3 s: when the queue's leader had led the meta group too, a failover took up to 4 s.)

// takeoverMetaWait bounds one wait of a takeover for the meta state (a meta election included);
// confirmRetry spaces the attempts.
const (
	takeoverMetaWait = 3 * time.Second
	confirmRetry     = 500 * time.Millisecond
)

// confirmDefinitions brings the lanes' definitions to the meta state's as this node takes the
// group over, and reports whether they are known current: false when the queue may have been
// made fast and the meta state is yet to be confirmed current (confirmLater).
func (a *actor) confirmDefinitions() bool {
	a.currentDefinitions()
	if !a.replicated() || !a.committed(queuegroup.LaneQueue) || (a.promotions == 0 && !a.othersLed) {
		return true // fast: held anyway; alone, or this node's own earlier process: nobody else leased
	}
	if _, ok := a.b.opts.Cluster.Network.(commitHearer); !ok || a.b.metaIndex == nil {
		return true // a network that cannot tell (tests' fakes), as metaConfirmed has it
	}
	return false
}

// confirmLater confirms the meta state current beside the actor, for the leadership of term, and
// then has the actor run the definitions it reads: the careful mode of an unconfirmed takeover
// ends, and a queue committed after all releases what its takeover held. warned: a failed
// attempt was logged already.
func (a *actor) confirmLater(term uint64, warned bool) {
	go func() {
		asked := time.Now()
		ok := a.b.metaConfirmed(takeoverMetaWait)
		if !ok { // a meta group not open answers at once: ask again confirmRetry after the last
			select {
			case <-time.After(confirmRetry - time.Since(asked)):
			case <-a.done:
				return // the actor stopped
			}
		}
		a.postIfAwake(func(a *actor) { // a group that fell asleep confirms when it leads again
			if !a.leading || a.term != term || !a.unconfirmed {
				return // deposed meanwhile: the next takeover confirms again
			}
			if !ok {
				if !warned {
					a.log.Warn("took over a committed queue without confirming its definition current yet; it holds the messages ready at the takeover for the reclaim grace and logs its leases until it can")
				}
				a.confirmLater(term, true)
				return
			}
			a.unconfirmed = false
			a.currentDefinitions()
			for l := range a.lanes {
				a.syncConfig(queuegroup.Lane(l))
			}
			a.loadHooks()
			now := a.now()
			end := now // committed after all: its leases were logged, nothing to hold
			if !a.committed(queuegroup.LaneQueue) {
				end = addMs(a.graceFrom, a.reclaimGrace()) // fast: the grace its definition says
			}
			a.st.Lane(queuegroup.LaneQueue).SetHoldEnd(now, end)
		})
	}()
}

// currentDefinitions reads the group's definitions from the meta state.
func (a *actor) currentDefinitions() {
	if asg, ok := a.b.catalog().Assignment(a.name); ok && asg.Name() == a.name {
		a.lanes[queuegroup.LaneQueue].def, a.lanes[queuegroup.LaneDeadLetter].def = asg.Queue, asg.DeadLetter
	}
}
