package raftgroup

import (
	"strconv"

	"github.com/hashicorp/raft"
)

// Current reports whether this node's state of the group is as current as the group's commits it
// has heard of: it leads (and so applied everything before serving), or it follows a leader it
// knows and has applied every entry that leader told it committed. A node that restarted
// follows nobody until a leader reaches it, and until then holds only what its last snapshot
// restored: its state may lack what was committed before it stopped.
func (g *Group) Current() bool {
	switch g.r.State() {
	case raft.Leader:
		return true
	case raft.Follower:
		if addr, _ := g.r.LeaderWithID(); addr == "" {
			return false
		}
		commit, err := strconv.ParseUint(g.r.Stats()["commit_index"], 10, 64)
		return err == nil && commit > 0 && g.r.AppliedIndex() >= commit
	}
	return false
}
