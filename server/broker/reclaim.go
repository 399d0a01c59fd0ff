package broker

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
