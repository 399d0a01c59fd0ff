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
// finds the queue committed first confirms the meta state current (metaConfirmed, as a
// QueueNotFound is confirmed: metafresh.go); when it cannot within takeoverMetaWait it holds as a
// fast queue would (a committed queue's ready messages wait for the grace; none is delivered
// twice).

// takeoverMetaWait bounds a takeover's wait for the meta state (a meta election included).
const takeoverMetaWait = 3 * time.Second

// confirmDefinitions brings the lanes' definitions to the meta state's as this node takes the
// group over, and reports whether they are known current: false when the queue may have been
// made fast and the meta state could not be confirmed current.
func (a *actor) confirmDefinitions() bool {
	a.currentDefinitions()
	if !a.replicated() || !a.committed(queuegroup.LaneQueue) || (a.promotions == 0 && !a.othersLed) {
		return true // fast: held anyway; alone, or this node's own earlier process: nobody else leased
	}
	if !a.b.metaConfirmed(takeoverMetaWait) {
		a.log.Warn("taking over a committed queue without confirming its definition current; holding its ready messages for the reclaim grace as if it were fast")
		return false
	}
	a.currentDefinitions()
	return true
}

// currentDefinitions reads the group's definitions from the meta state.
func (a *actor) currentDefinitions() {
	if asg, ok := a.b.catalog().Assignment(a.name); ok && asg.Name() == a.name {
		a.lanes[queuegroup.LaneQueue].def, a.lanes[queuegroup.LaneDeadLetter].def = asg.Queue, asg.DeadLetter
	}
}
