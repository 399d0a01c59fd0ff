package meta

import (
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/auth"
)

// NodeID names a node: its Raft server ID.
type NodeID string

// Node is a member of the cluster.
type Node struct {
	ID NodeID
	// Address is where the other nodes reach it (its inter-node address).
	Address string
	// Advertise is the FIBP address clients are given for it (NotLeader's leader_addr,
	// GetRoutes, GetClusterStatus); empty until the node has told it.
	Advertise string
	// Draining: the node hands every leadership it holds to other nodes (DrainNode), until the
	// drain is cancelled.
	Draining bool
}

// Assignment is one queue group as the catalog holds it: its two definitions and the nodes that
// replicate it.
type Assignment struct {
	Queue      store.QueueRecord // the queue
	DeadLetter store.QueueRecord // its dead-letter queue
	// Replication is what the group was created with (0 = DefaultReplication).
	Replication uint32
	// Replicas are the nodes that host the group, its preferred leader first; never empty (a
	// group placed while no member was known lives on Catalog.Self).
	Replicas []NodeID
	// Joining are the replicas placed by a RemoveMember that have not caught up yet (membership.go):
	// such a replica starts empty and is sent its state by the group's leader.
	Joining []NodeID
	// Leaving are removed nodes that the group's Raft configuration may still hold: its leader
	// takes each out and records it (ReplicaLeft).
	Leaving []NodeID
}

// Name is the group's name: its queue's.
func (a *Assignment) Name() string { return a.Queue.Name }

// Has reports whether node id replicates the group.
func (a *Assignment) Has(id NodeID) bool { return slices.Contains(a.Replicas, id) }

// PreferredLeader is the replica that should lead the group.
func (a *Assignment) PreferredLeader() NodeID { return a.Replicas[0] }

// addrs are a member's addresses and its drain (Node's).
type addrs struct {
	address, advertise string
	draining           bool
}

// placement is where a group lives; replicas is nil while no member is known.
type placement struct {
	replication uint32
	replicas    []NodeID
	joining     []NodeID // of replicas: placed by a RemoveMember, not caught up yet
}

// load counts what a node hosts.
type load struct{ leads, replicas int }

// Catalog is the meta state. Its methods read it and are safe for concurrent use; it changes only
// through the FSM. The records it returns share their byte slices (ordering and dedup keys)
// with the catalog: callers must not modify them.
type Catalog struct {
	self NodeID
	keys *auth.Store // API keys and ACLs; it has its own lock

	mu     sync.RWMutex
	queues map[string]store.QueueRecord // queues and dead-letter queues, by name
	groups int                          // queues that are no dead-letter queue
	config map[string]string
	nodes  map[NodeID]addrs // members: their addresses
	// removed: the nodes removed from the cluster (RemoveMember), each with the groups whose Raft
	// configuration may still hold it (MetaGroupName for the meta group); empty once released.
	removed    map[NodeID]map[string]bool
	placements map[string]placement
	loads      map[NodeID]load          // from placements
	throttles  map[string]ThrottleOwner // throttles.go
}

func newCatalog(self NodeID) *Catalog {
	c := &Catalog{self: self, keys: auth.NewStore()}
	c.reset()
	return c
}

// reset empties the state; c.mu is held (or c is not yet shared).
func (c *Catalog) reset() {
	c.queues, c.groups, c.config = map[string]store.QueueRecord{}, 0, map[string]string{}
	c.nodes, c.placements, c.loads = map[NodeID]addrs{}, map[string]placement{}, map[NodeID]load{}
	c.removed = map[NodeID]map[string]bool{}
	c.throttles = map[string]ThrottleOwner{}
}

// Self is the node this catalog belongs to, which hosts every group placed while no member was
// known.
func (c *Catalog) Self() NodeID { return c.self }

// Keys returns the API keys and ACLs. Callers read it; it changes only through the FSM (and the
// bootstrap key, which comes from the node's configuration).
func (c *Catalog) Keys() *auth.Store { return c.keys }

// Queue returns the definition of a queue or dead-letter queue.
func (c *Catalog) Queue(name string) (store.QueueRecord, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	q, ok := c.queues[name]
	return q, ok
}

// Queues returns every queue and dead-letter queue definition, by name.
func (c *Catalog) Queues() []store.QueueRecord {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := slices.Collect(maps.Values(c.queues))
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Groups counts the queue groups (queues that are no dead-letter queue).
func (c *Catalog) Groups() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.groups
}

// Config returns a copy of the runtime config entries.
func (c *Catalog) Config() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.config)
}

// ConfigValue returns one runtime config entry.
func (c *Catalog) ConfigValue(key string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.config[key]
	return v, ok
}

// Nodes returns the cluster's members, by ID; none on a node that never recorded one.
func (c *Catalog) Nodes() []Node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nodeList()
}

func (c *Catalog) nodeList() []Node {
	out := make([]Node, 0, len(c.nodes))
	for id, a := range c.nodes {
		out = append(out, Node{ID: id, Address: a.address, Advertise: a.advertise, Draining: a.draining})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Node returns the member id.
func (c *Catalog) Node(id NodeID) (Node, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	a, ok := c.nodes[id]
	return Node{ID: id, Address: a.address, Advertise: a.advertise, Draining: a.draining}, ok
}

// Draining reports whether member id is draining.
func (c *Catalog) Draining(id NodeID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nodes[id].draining
}

// Assignment returns the group of queue, which names the group's queue or its dead-letter queue.
func (c *Catalog) Assignment(queue string) (Assignment, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if q, ok := c.queues[queue]; ok && q.DLQOf != "" {
		queue = q.DLQOf
	}
	return c.assignment(queue)
}

// Assignments returns every queue group, by name.
func (c *Catalog) Assignments() []Assignment {
	return c.AssignmentsFor("")
}

// AssignmentsFor returns the queue groups that node id replicates, by name; every group when id
// is empty.
func (c *Catalog) AssignmentsFor(id NodeID) []Assignment {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Assignment
	for _, name := range c.groupNames() {
		a, _ := c.assignment(name)
		if id == "" || a.Has(id) {
			out = append(out, a)
		}
	}
	return out
}

// groupNames returns the names of every group, sorted; c.mu is held.
func (c *Catalog) groupNames() []string {
	names := make([]string, 0, c.groups)
	for name, q := range c.queues {
		if q.DLQOf == "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// assignment builds the Assignment of group name; c.mu is held. A group whose dead-letter
// queue has no definition (a log that never wrote one) gets the one it is created with.
func (c *Catalog) assignment(name string) (Assignment, bool) {
	q, ok := c.queues[name]
	if !ok || q.DLQOf != "" {
		return Assignment{}, false
	}
	dlq, ok := c.queues[DeadLetterName(name)]
	if !ok || dlq.DLQOf != name {
		dlq = deadLetterRecord(&q)
	}
	p := c.placements[name]
	replicas := slices.Clone(p.replicas)
	if len(replicas) == 0 {
		replicas = []NodeID{c.self}
	}
	return Assignment{Queue: q, DeadLetter: dlq, Replication: p.replication, Replicas: replicas,
		Joining: slices.Clone(p.joining), Leaving: c.leavingOf(name)}, true
}

// putQueue stores a definition; c.mu is held.
func (c *Catalog) putQueue(q store.QueueRecord) {
	old, ok := c.queues[q.Name]
	wasGroup, isGroup := ok && old.DLQOf == "", q.DLQOf == ""
	switch {
	case isGroup && !wasGroup:
		c.groups++
	case wasGroup && !isGroup:
		c.groups--
		c.unplace(q.Name)
	}
	c.queues[q.Name] = q
}

// dropQueue deletes a definition, and the placement of a group's queue; c.mu is held.
func (c *Catalog) dropQueue(name string) {
	q, ok := c.queues[name]
	if !ok {
		return
	}
	delete(c.queues, name)
	if q.DLQOf == "" {
		c.groups--
		c.unplace(name)
		for _, left := range c.removed {
			delete(left, name) // a deleted group's configuration holds nobody
		}
	}
}
