package raftgroup

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Membership changes: a node that joins a running cluster is added to a group by its leader
// (AddNonvoter) and starts its own member of the group empty (Config.Join), to be sent the log
// or a snapshot by the leader.

// Members is the group's latest configuration as this node knows it (committed or not).
func (g *Group) Members() ([]raft.Server, error) {
	f := g.r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raftgroup: configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

// AddNonvoter adds id, reached at addr, to the group as a member that receives the log and does
// not vote, and waits, at most timeout, until the change is committed. Only the leader can; a
// member already in the configuration keeps its suffrage (raft leaves a voter a voter).
func (g *Group) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, timeout time.Duration) error {
	if err := g.r.AddNonvoter(id, addr, 0, timeout).Error(); err != nil {
		return fmt.Errorf("raftgroup: adding %s: %w", id, err)
	}
	return nil
}
