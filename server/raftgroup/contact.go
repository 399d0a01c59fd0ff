package raftgroup

import (
	"time"

	"github.com/hashicorp/raft"
)

// ConfirmedAt says when this node's state of the group was last confirmed current: now when it
// leads (a leader that cannot reach a majority steps down once its leader lease lapses), the last
// time it heard from the leader it follows when it has applied every entry that leader told it
// committed (Current); ok is false otherwise (no leader known, an election, entries not applied
// yet).
func (g *Group) ConfirmedAt(now time.Time) (at time.Time, ok bool) {
	switch g.r.State() {
	case raft.Leader:
		return now, true
	case raft.Follower:
		if !g.Current() {
			return time.Time{}, false
		}
		return g.r.LastContact(), true
	}
	return time.Time{}, false
}
