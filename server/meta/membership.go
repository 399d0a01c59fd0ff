package meta

import (
	"slices"
	"sort"

	"github.com/filamq/fila/generated/queuelog"
)

// Removing a member (RemoveMember) is decided here, in apply, from the meta state alone:
//
//   - the member leaves the members, and its ID is remembered as removed: no node is recorded
//     under it again (PutMember refuses it), so a node that still runs with the removed node's
//     data — or a new one given its ID — can never be taken for it;
//   - every group it replicated gets another member in its place, chosen as placement chooses a
//     replica (the fewest replicas, then the lowest ID), a draining member only when no other is
//     left; the new replica is recorded as joining: it starts empty, outside the group's Raft
//     configuration, its leader adds it and sends it the group's state, and once it has caught up
//     it is recorded so (ReplicaCaughtUp) and made a voter, and the removed node's replica is taken
//     out of the configuration (server/broker/membership.go);
//   - a group no other member can take keeps one replica fewer.
//
// The member's position among a group's replicas is given up: when it was the preferred leader,
// the next replica is.

// RemoveMember is the command that removes member id from the cluster; force removes it even when
// it is not draining.
func RemoveMember(id NodeID, force bool) *queuelog.RemoveMember {
	return &queuelog.RemoveMember{ID: string(id), Force: force}
}

// ReplicaCaughtUp is the command that records that node id's joining replica of queue's group
// has caught up with the group's leader.
func ReplicaCaughtUp(queue string, id NodeID) *queuelog.ReplicaCaughtUp {
	return &queuelog.ReplicaCaughtUp{Queue: queue, ID: string(id)}
}

// MemberWatcher is an optional ability of a Reconciler, found by type assertion: it hears each
// member that is removed (RemoveMember), on the apply goroutine, after the change (and after the
// Assign of each group placed again). A Restore replaces the members without calling it; read
// Catalog.Removed then.
type MemberWatcher interface {
	MemberRemoved(id NodeID)
}

// Removed reports whether node id was removed from the cluster.
func (c *Catalog) Removed(id NodeID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.removed[id]
}

// RemovedNodes returns the IDs of the nodes removed from the cluster, sorted.
func (c *Catalog) RemovedNodes() []NodeID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]NodeID, 0, len(c.removed))
	for id := range c.removed {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Joining counts the replicas placed by a RemoveMember that have not caught up yet, and the
// groups they belong to.
func (c *Catalog) Joining() (replicas, groups int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, p := range c.placements {
		if len(p.joining) > 0 {
			replicas += len(p.joining)
			groups++
		}
	}
	return replicas, groups
}

// removeMember validates and carries out a RemoveMember.
func (c *Catalog) removeMember(cmd *queuelog.RemoveMember, ch *changes) error {
	id := NodeID(cmd.ID)
	a, ok := c.nodes[id]
	switch {
	case !ok:
		return refuse(CodeNodeNotFound, "no node of the cluster has the ID %q", cmd.ID)
	case len(c.nodes) == 1:
		return refuse(CodeLastMember, "node %q is the cluster's last member: a cluster cannot remove its last node", cmd.ID)
	case !a.draining && !cmd.Force:
		return refuse(CodeNodeNotDrained, "node %q is not drained: drain it first (DrainNode), or force the removal of a node that is lost for good", cmd.ID)
	}
	var moved []string
	for _, name := range c.groupNames() {
		if slices.Contains(c.placements[name].replicas, id) {
			moved = append(moved, name)
			ch.touch(c, name)
		}
	}
	delete(c.nodes, id)
	c.removed[id] = true
	for _, name := range moved {
		c.replace(name, id)
	}
	ch.removed = append(ch.removed, id)
	return nil
}

// replace gives the place of replica gone in group name to another member, recorded as joining;
// c.mu is held, and gone is no member any more.
func (c *Catalog) replace(name string, gone NodeID) {
	p := c.placements[name]
	next := placement{replication: p.replication}
	for _, id := range p.replicas {
		if id != gone {
			next.replicas = append(next.replicas, id)
		}
	}
	for _, id := range p.joining {
		if id != gone {
			next.joining = append(next.joining, id)
		}
	}
	c.unplace(name)
	if sub, ok := c.substitute(next.replicas); ok {
		next.replicas = append(next.replicas, sub)
		next.joining = append(next.joining, sub)
	}
	c.placements[name] = next
	for i, id := range next.replicas {
		l := c.loads[id]
		l.replicas++
		if i == 0 {
			l.leads++
		}
		c.loads[id] = l
	}
}

// substitute chooses the member that takes a removed replica's place in a group replicated by
// replicas: a member that is not one of them, not draining if one can, with the fewest replicas,
// then the lowest ID; c.mu is held.
func (c *Catalog) substitute(replicas []NodeID) (NodeID, bool) {
	var cands []NodeID
	for id := range c.nodes {
		if !slices.Contains(replicas, id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if da, db := c.nodes[a].draining, c.nodes[b].draining; da != db {
			return !da
		}
		if la, lb := c.loads[a].replicas, c.loads[b].replicas; la != lb {
			return la < lb
		}
		return a < b
	})
	return cands[0], true
}

// caughtUp carries out a ReplicaCaughtUp.
func (c *Catalog) caughtUp(cmd *queuelog.ReplicaCaughtUp, ch *changes) {
	p, ok := c.placements[cmd.Queue]
	i := slices.Index(p.joining, NodeID(cmd.ID))
	if !ok || i < 0 {
		return
	}
	ch.touch(c, cmd.Queue)
	p.joining = slices.Delete(slices.Clone(p.joining), i, i+1)
	if len(p.joining) == 0 {
		p.joining = nil
	}
	c.placements[cmd.Queue] = p
}
