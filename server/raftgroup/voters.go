package raftgroup

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// AddVoter adds id, reached at addr, to the group as a voter, or makes a non-voter of the group a
// voter, and waits, at most timeout, until the change is committed. Only the leader can.
func (g *Group) AddVoter(id raft.ServerID, addr raft.ServerAddress, timeout time.Duration) error {
	if err := g.r.AddVoter(id, addr, 0, timeout).Error(); err != nil {
		return fmt.Errorf("raftgroup: making %s a voter: %w", id, err)
	}
	return nil
}

// RemoveServer takes id out of the group's configuration and waits, at most timeout, until the
// change is committed. Only the leader can; a leader that removes itself steps down.
func (g *Group) RemoveServer(id raft.ServerID, timeout time.Duration) error {
	if err := g.r.RemoveServer(id, 0, timeout).Error(); err != nil {
		return fmt.Errorf("raftgroup: removing %s: %w", id, err)
	}
	return nil
}
