package meta

import (
	"slices"
	"sort"
)

// DefaultReplication is how many nodes replicate a queue group created with replication 0.
const DefaultReplication = 3

// Placement is decided in apply, from the meta state alone, so every node places a group alike:
//
//   - a group goes on min(replication, members) members;
//   - its preferred leader (the first replica) is the member that leads the fewest groups, then
//     the one with the fewest replicas, then the lowest ID;
//   - its other replicas are the members with the fewest replicas, then the lowest ID.
//
// Groups created one after another therefore spread their preferred leaders round-robin: the
// members' leader counts differ by at most one (deletions can leave them further apart: the
// placement is never changed afterwards; rebalancing evens out who actually leads, and prefers
// these leaders when it moves one, server/broker/rebalance.go). A group created while no member is
// known has no replicas; it is placed as soon as the first member is added.

// place decides the placement of group name; c.mu is held.
func (c *Catalog) place(name string, replication uint32) {
	c.unplace(name)
	p := placement{replication: replication}
	if len(c.nodes) > 0 {
		p.replicas = c.choose(replication)
		for i, id := range p.replicas {
			l := c.loads[id]
			l.replicas++
			if i == 0 {
				l.leads++
			}
			c.loads[id] = l
		}
	}
	c.placements[name] = p
}

// unplace forgets the placement of group name; c.mu is held.
func (c *Catalog) unplace(name string) {
	p, ok := c.placements[name]
	if !ok {
		return
	}
	delete(c.placements, name)
	for i, id := range p.replicas {
		l := c.loads[id]
		l.replicas--
		if i == 0 {
			l.leads--
		}
		if l == (load{}) {
			delete(c.loads, id)
		} else {
			c.loads[id] = l
		}
	}
}

// choose picks the replicas of a new group among the members, preferred leader first; c.mu is
// held and there is at least one member.
func (c *Catalog) choose(replication uint32) []NodeID {
	n := int(replication)
	if n == 0 {
		n = DefaultReplication
	}
	members := make([]NodeID, 0, len(c.nodes))
	for id := range c.nodes {
		members = append(members, id)
	}
	n = min(n, len(members))
	byLeads := func(a, b NodeID) bool {
		la, lb := c.loads[a], c.loads[b]
		if la.leads != lb.leads {
			return la.leads < lb.leads
		}
		if la.replicas != lb.replicas {
			return la.replicas < lb.replicas
		}
		return a < b
	}
	sort.Slice(members, func(i, j int) bool { return byLeads(members[i], members[j]) })
	leader, rest := members[0], members[1:]
	sort.Slice(rest, func(i, j int) bool {
		la, lb := c.loads[rest[i]], c.loads[rest[j]]
		if la.replicas != lb.replicas {
			return la.replicas < lb.replicas
		}
		return rest[i] < rest[j]
	})
	return append([]NodeID{leader}, slices.Clone(rest[:n-1])...)
}

// placeUnplaced places every group that has no replicas yet (created while no member was
// known), by name; c.mu is held and there is at least one member. It returns their names.
func (c *Catalog) placeUnplaced() []string {
	var placed []string
	for _, name := range c.groupNames() {
		if p := c.placements[name]; len(p.replicas) == 0 {
			c.place(name, p.replication)
			placed = append(placed, name)
		}
	}
	return placed
}

// recount rebuilds the loads from the placements (after a Restore); c.mu is held.
func (c *Catalog) recount() {
	c.loads = map[NodeID]load{}
	for _, p := range c.placements {
		for i, id := range p.replicas {
			l := c.loads[id]
			l.replicas++
			if i == 0 {
				l.leads++
			}
			c.loads[id] = l
		}
	}
}
