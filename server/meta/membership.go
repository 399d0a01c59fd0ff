package meta

import (
	"slices"
	"sort"

	"github.com/filamq/fila/generated/queuelog"
)

// Removing a member (RemoveMember) is decided here, in apply, from the meta state alone:
//
//   - the member leaves the members, and its ID is remembered as removed, with the groups whose
//     Raft configuration may still hold it: every group it replicated, and the meta group. While
//     one is left no node is recorded under the ID (PutMember refuses it): a node given the ID
//     would be taken, in that group, for the removed one, and its empty log and forgotten votes
//     could help elect a leader lacking entries the removed node had helped commit;
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
//
// A group's leader that has the removed node out of its committed configuration records it
// (ReplicaLeft), and so does the meta group's leader for the meta group; deleting a group drops
// it too. Once no group is left the ID is released: a PutMember under it (a fresh node, with its
// inter-node address) is a new member that hosts nothing yet. A group with no leader (every
// replica lost) stays left until it is deleted, and holds the ID so.
//
// A member added (PutMember of an ID that is no member) tops up every group with fewer replicas
// than its replication: the new member joins it as a joining replica, as a re-placed one does.
// So a 3-node cluster that removed a node and runs its groups on 2 replicas gets them back to 3
// when a node (the replacement) is added.

// MetaGroupName names the meta group among the groups a removed node is leaving (ReplicaLeft's
// queue): no queue has an empty name.
const MetaGroupName = ""

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

// ReplicaLeft is the command that records that group's Raft configuration no longer holds
// removed node id (MetaGroupName for the meta group).
func ReplicaLeft(group string, id NodeID) *queuelog.ReplicaLeft {
	return &queuelog.ReplicaLeft{Queue: group, ID: string(id)}
}

// MemberWatcher is an optional ability of a Reconciler, found by type assertion: it hears each
// member that is removed (RemoveMember), on the apply goroutine, after the change (and after the
// Assign of each group placed again). A Restore replaces the members without calling it; read
// Catalog.Removed then.
type MemberWatcher interface {
	MemberRemoved(id NodeID)
}

// Removed reports whether node id was removed from the cluster (and not added again since).
func (c *Catalog) Removed(id NodeID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.removed[id]
	return ok
}

// Leaving counts the groups (the meta group among them) whose Raft configuration may still hold
// removed node id; 0 once its ID is released, or when it was not removed.
func (c *Catalog) Leaving(id NodeID) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.removed[id])
}

// MetaLeaving returns the removed nodes the meta group's configuration may still hold, sorted.
func (c *Catalog) MetaLeaving() []NodeID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.leavingOf(MetaGroupName)
}

// leavingOf returns the removed nodes group's configuration may still hold, sorted; c.mu is held.
func (c *Catalog) leavingOf(group string) []NodeID {
	var out []NodeID
	for id, left := range c.removed {
		if left[group] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// RemovedNodes returns the IDs of the nodes removed from the cluster (and not added again), sorted.
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
	left := map[string]bool{MetaGroupName: true}
	for _, name := range moved {
		c.replace(name, id)
		left[name] = true
	}
	c.removed[id] = left
	ch.removed = append(ch.removed, id)
	c.disown(id, ch)
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

// replicaLeft carries out a ReplicaLeft: group no longer holds removed node cmd.ID.
func (c *Catalog) replicaLeft(cmd *queuelog.ReplicaLeft) {
	if left, ok := c.removed[NodeID(cmd.ID)]; ok {
		delete(left, cmd.Queue)
	}
}

// readmit validates that removed node id may be recorded again (PutMember with address) and
// forgets its removal; c.mu is held.
func (c *Catalog) readmit(id NodeID, address string) error {
	left, ok := c.removed[id]
	switch {
	case !ok:
		return nil
	case len(left) > 0:
		return refuse(CodeInvalidNode, "node ID %s was removed from this cluster and its removal is not complete: %d groups "+
			"(the meta group counts) may still hold it in their Raft configuration; the ID is free once `fila cluster members` "+
			"shows it removed (ID free)", id, len(left))
	case address == "":
		return refuse(CodeInvalidNode, "node ID %s was removed from this cluster: a node recorded under it again gives its inter-node address", id)
	}
	delete(c.removed, id)
	return nil
}

// topUp gives new member id a joining replica in every group with fewer replicas than its
// replication, by name; c.mu is held.
func (c *Catalog) topUp(id NodeID, ch *changes) {
	for _, name := range c.groupNames() {
		p := c.placements[name]
		want := int(p.replication)
		if want == 0 {
			want = DefaultReplication
		}
		if len(p.replicas) == 0 || len(p.replicas) >= want || slices.Contains(p.replicas, id) {
			continue
		}
		ch.touch(c, name)
		p.replicas = append(slices.Clone(p.replicas), id)
		p.joining = append(slices.Clone(p.joining), id)
		c.placements[name] = p
		l := c.loads[id]
		l.replicas++
		c.loads[id] = l
	}
}
