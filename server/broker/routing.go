package broker

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// Routing answers: where each queue's leader is, as this node knows it, for a client that asked a
// node that does not lead the queue (NotLeader with the leader's FIBP address, NodeNotReady while
// no leader is known), for GetRoutes, and for GetClusterStatus. A queue group this node
// replicates is led by whoever its Raft group says; one it does not replicate, by the placement's
// preferred leader, which may be stale (the client then gets a NotLeader from there). A node is
// named to clients by the FIBP address it recorded in the meta state (SetAdvertise), never by its
// inter-node address.

var _ service.Cluster = (*Broker)(nil)

// clustered reports whether this node is a node of a cluster.
func (b *Broker) clustered() bool { return b.opts.Cluster.Network != nil }

// peerStates is the optional side of a Network that knows which nodes it is connected to
// (nodelink.Link).
type peerStates interface {
	Connected(node meta.NodeID) bool
}

// SetAdvertise records addr as the FIBP address clients are given for this node (PutMember),
// once the meta state lists this node and a meta leader is known, retrying until it is recorded
// or the broker closes; a single node ignores it.
func (b *Broker) SetAdvertise(addr string) {
	if !b.clustered() || addr == "" {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			b.log.Warn("this node's advertised address names no host that clients can reach (listen binds every interface): "+
				"give --advertise HOST:PORT; NotLeader, GetRoutes and GetClusterStatus name it as it is", "advertise", addr)
		}
	}
	go b.recordAdvertise(addr)
}

// recordAdvertise is SetAdvertise's proposer.
func (b *Broker) recordAdvertise(addr string) {
	self := b.nodeID()
	wait := 50 * time.Millisecond
	for failures := 0; ; failures++ {
		n, listed := b.catalog().Node(self)
		if listed && n.Advertise == addr {
			return
		}
		if listed { // a node not listed yet would be added without its inter-node address
			b.mu.RLock()
			closed := b.closed
			b.mu.RUnlock()
			if closed {
				return
			}
			b.adminMu.Lock()
			err := b.proposeMeta(meta.PutNode(meta.Node{ID: self, Advertise: addr}))
			b.adminMu.Unlock()
			if err == nil {
				b.log.Info("recorded this node's advertised address", "advertise", addr)
				continue
			}
			if failures == 20 {
				b.log.Warn("recording this node's advertised address keeps failing; retrying", "advertise", addr, "err", err)
			}
		}
		select {
		case <-b.stopWatch:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// routeWait bounds how long a leader lookup waits for a replica's actor to answer.
const routeWait = 500 * time.Millisecond

// knownLeader is what a local replica's Raft group knows of its leader.
type knownLeader struct {
	id     meta.NodeID // "" when it knows none (or its actor did not answer within routeWait)
	asleep bool        // the group sleeps: its Raft group is stopped and knows nothing
}

// knownLeaders asks each of acts (nil: no local replica) which node leads its group; the
// lookups run together, within routeWait. A sleeping actor is not woken.
func knownLeaders(acts []*actor) []knownLeader {
	out := make([]knownLeader, len(acts))
	answers := make([]chan meta.NodeID, len(acts))
	for i, a := range acts {
		switch {
		case a == nil:
		case a.leadingNow.Load():
			out[i].id = a.b.nodeID()
		case a.asleep(func(*summary) {}):
			out[i].asleep = true
		default:
			ch := make(chan meta.NodeID, 1)
			answers[i] = ch
			a.post(func(a *actor) {
				var id meta.NodeID
				switch {
				case a.g != nil:
					id = meta.NodeID(a.g.LeaderID())
				case a.suspended && !a.leading: // stood down while the store refuses writes
					id = a.standInLeader()
				}
				ch <- id
			})
		}
	}
	deadline := time.NewTimer(routeWait)
	defer deadline.Stop()
	for i, ch := range answers {
		if ch == nil {
			continue
		}
		select {
		case out[i].id = <-ch:
		case <-acts[i].done:
		case <-deadline.C:
			return out
		}
	}
	return out
}

// leaders returns the node that leads each of groups as this node knows it ("" when it knows
// none): its replica's Raft group's leader, else (no replica here, or it sleeps) the placement's
// preferred leader.
func (b *Broker) leaders(groups []meta.Assignment) []meta.NodeID {
	cat := b.catalog()
	acts := make([]*actor, len(groups))
	for i := range groups {
		acts[i] = b.lookup(groups[i].Name()).a
	}
	known := knownLeaders(acts)
	out := make([]meta.NodeID, len(groups))
	for i := range groups {
		if acts[i] == nil || known[i].asleep {
			out[i] = preferredLeader(cat, &groups[i])
		} else {
			out[i] = known[i].id
		}
	}
	return out
}

// preferredLeader is the replica of a that should lead it: its placement's preferred leader,
// unless that node drains, then the first replica that does not.
func preferredLeader(cat *meta.Catalog, a *meta.Assignment) meta.NodeID {
	for _, id := range a.Replicas {
		if !cat.Draining(id) {
			return id
		}
	}
	return a.PreferredLeader()
}

// route is queue's Route when node id leads it ("": unknown).
func route(cat *meta.Catalog, queue string, id meta.NodeID) service.Route {
	r := service.Route{Queue: queue}
	if id == "" {
		return r
	}
	r.LeaderNodeID = nodeNumber(id)
	if n, ok := cat.Node(id); ok {
		r.LeaderAddr = n.Advertise
	}
	return r
}

// nodeNumber is a node ID as FIBP carries it (0 for an ID that is not a number: "local").
func nodeNumber(id meta.NodeID) uint64 {
	n, err := strconv.ParseUint(string(id), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// QueueRoutes answers GetRoutes on a node of a cluster (service.Cluster).
func (b *Broker) QueueRoutes(queues []string) ([]service.Route, bool, *Error) {
	if !b.clustered() {
		return nil, false, nil
	}
	cat := b.catalog()
	if len(queues) == 0 {
		for _, q := range cat.Queues() {
			if clientQueue(q.Name) == q.Name { // a shard's group is answered with its queue
				queues = append(queues, q.Name)
			}
		}
	}
	var groups []meta.Assignment
	first := make([]int, len(queues)) // each queue's first group in groups; its shards follow
	for i, q := range queues {
		shards := b.shardGroups(q)
		if shards == nil {
			shards = []string{q}
		}
		first[i] = len(groups)
		for _, g := range shards {
			a, ok := cat.Assignment(g)
			if !ok {
				return nil, true, errorf(CodeQueueNotFound, "queue %q does not exist", q)
			}
			groups = append(groups, a)
		}
	}
	ids := b.leaders(groups)
	out := make([]service.Route, len(queues))
	for i, q := range queues {
		end := len(groups)
		if i+1 < len(queues) {
			end = first[i+1]
		}
		out[i] = route(cat, q, ids[first[i]])
		out[i].Shards = shardRoutes(cat, ids[first[i]:end])
	}
	return out, true, nil
}

// shardRoutes are the routes of a queue's shards, led by ids; nil for one group (no shards).
func shardRoutes(cat *meta.Catalog, ids []meta.NodeID) []service.ShardRoute {
	if len(ids) <= 1 {
		return nil
	}
	out := make([]service.ShardRoute, len(ids))
	for i, id := range ids {
		r := route(cat, "", id)
		out[i] = service.ShardRoute{Index: uint32(i), LeaderNodeID: r.LeaderNodeID, LeaderAddr: r.LeaderAddr}
	}
	return out
}

// ClusterNodes answers GetClusterStatus on a node of a cluster (service.Cluster): every member
// with its advertised address, up (this node, or one the link is connected to), unreachable or
// draining (DrainNode), and the queue groups it leads as this node knows (QueueRoutes' leaders);
// the meta leader.
func (b *Broker) ClusterNodes() ([]service.NodeStatus, uint64, bool) {
	if !b.clustered() {
		return nil, 0, false
	}
	cat := b.catalog()
	groups := cat.Assignments()
	leads := map[meta.NodeID]uint32{}
	for _, id := range b.leaders(groups) {
		leads[id]++
	}
	self := b.nodeID()
	conn, _ := b.opts.Cluster.Network.(peerStates)
	members := cat.Nodes()
	out := make([]service.NodeStatus, len(members))
	for i, n := range members {
		s := service.NodeStatus{ID: nodeNumber(n.ID), Addr: n.Advertise, State: service.NodeUp, QueueLeaderships: leads[n.ID]}
		switch {
		case n.ID != self && conn != nil && !conn.Connected(n.ID):
			s.State = service.NodeUnreachable
		case n.Draining:
			s.State = service.NodeDraining
		}
		out[i] = s
	}
	var metaLeader uint64
	if g := b.metaGroupNow(); g != nil {
		if g.Leader() {
			metaLeader = nodeNumber(self)
		} else {
			metaLeader = nodeNumber(meta.NodeID(g.LeaderID()))
		}
	}
	return out, metaLeader, true
}

// The answers to requests for a queue this node does not lead.

// absentCode answers a request for queue, which has no replica here: NotLeader when the queue
// exists (another node hosts it: GetRoutes or the route hint names it), else QueueNotFound — on a
// node that follows the meta group, once it confirmed its state is current (metafresh.go), and
// NodeNotReady while it cannot.
func (b *Broker) absentCode(queue string) Code {
	if b.clustered() {
		if _, ok := b.catalog().Assignment(queue); ok {
			return CodeNotLeader
		}
		g := b.metaGroupNow()
		if g == nil || !g.Current() {
			// A node that restarted learns the queues created before from the meta leader:
			// until then a queue it does not know may well exist.
			return CodeNodeNotReady
		}
		if !g.Leader() {
			return b.confirmAbsent(g, queue) // created through another node a moment ago? (metafresh.go)
		}
	}
	return CodeQueueNotFound
}

// leaderRoutes returns the route of each of queues; a route is nil while no leader is known, or
// when the one known is this node (it was elected and has not taken over yet).
func (b *Broker) leaderRoutes(queues map[string]bool) map[string]*service.Route {
	cat := b.catalog()
	out := make(map[string]*service.Route, len(queues))
	for q, id := range b.leaderIDs(queues) {
		r := route(cat, q, id)
		out[q] = &r
	}
	return out
}

// leaderIDs returns the other node that leads each of queues, as this node knows it (absent
// while no leader is known, or when the one known is this node).
func (b *Broker) leaderIDs(queues map[string]bool) map[string]meta.NodeID {
	cat := b.catalog()
	var names []string
	var groups []meta.Assignment
	for q := range queues {
		if a, ok := cat.Assignment(q); ok {
			names, groups = append(names, q), append(groups, a)
		}
	}
	out := make(map[string]meta.NodeID, len(queues))
	self := b.nodeID()
	for i, id := range b.leaders(groups) {
		if id != "" && id != self {
			out[names[i]] = id
		}
	}
	return out
}

// routeEnqueue wraps an Enqueue's done on a node of a cluster: a message refused NotLeader is
// forwarded to its queue's leader by fwd (forward.go), or, without fwd, gets the queue's route
// (the EnqueueResult's route hint); it is answered NodeNotReady while no leader is known.
func (b *Broker) routeEnqueue(msgs []Message, done func([]EnqueueResult, *Error), fwd *forwarder) func([]EnqueueResult, *Error) {
	return func(rs []EnqueueResult, e *Error) {
		queues := map[string]bool{}
		for i := range rs {
			if rs[i].Code == CodeNotLeader {
				queues[msgs[i].Queue] = true
			}
		}
		if len(queues) == 0 {
			done(rs, e)
			return
		}
		go func() { // the lookups wait for the replicas' actors: never on one of them
			ids := b.leaderIDs(queues)
			cat := b.catalog()
			var parts forwardParts
			for i := range rs {
				if rs[i].Code != CodeNotLeader {
					continue
				}
				id, ok := ids[msgs[i].Queue]
				switch {
				case !ok:
					rs[i].Code = CodeNodeNotReady
				case fwd != nil:
					parts.add(id, i)
				default:
					r := route(cat, msgs[i].Queue, id) // a sharded queue's message's names its shard's group (sharding.go)
					rs[i].Leader = &r
				}
			}
			if len(parts.nodes) == 0 {
				done(rs, e)
				return
			}
			for q, id := range ids {
				fwd.learn(q, id)
			}
			fin := newFanIn(len(parts.nodes), func() { done(rs, e) })
			for _, n := range parts.nodes {
				fwd.enqueue(n, msgs, parts.items[n], rs, fin.finish)
			}
		}()
	}
}

// routeSettle wraps an Ack's, Nack's or ExtendLease's done on a node of a cluster: an item
// refused NotLeader is forwarded to its queue's leader by fwd (forward.go), and answered
// NodeNotReady while no leader of its queue is known.
func (b *Broker) routeSettle(kind settleKind, queues []string, items []settleItem, codes []Code, ext []ExtendResult, done func(*Error),
	fwd *forwarder) func(*Error) {
	code := func(i int) *Code {
		if ext != nil {
			return &ext[i].Code
		}
		return &codes[i]
	}
	return func(e *Error) {
		refused := map[string]bool{}
		for i, q := range queues {
			if *code(i) == CodeNotLeader {
				refused[q] = true
			}
		}
		if e != nil || len(refused) == 0 {
			done(e)
			return
		}
		go func() {
			ids := b.leaderIDs(refused)
			var parts forwardParts
			for i, q := range queues {
				c := code(i)
				if *c != CodeNotLeader {
					continue
				}
				id, ok := ids[q]
				switch {
				case !ok:
					*c = CodeNodeNotReady
				case fwd != nil:
					parts.add(id, i)
				}
			}
			if len(parts.nodes) == 0 {
				done(e)
				return
			}
			for q, id := range ids {
				fwd.learn(q, id)
			}
			fin := newFanIn(len(parts.nodes), func() { done(e) })
			for _, n := range parts.nodes {
				fwd.settle(kind, n, queues, items, parts.items[n], codes, ext, fin.finish)
			}
		}()
	}
}

// notLeader answers a Consume of queue on a node that does not lead it: NotLeader with the
// leader's address, or NodeNotReady while no leader is known.
func (b *Broker) notLeader(queue string) *Error {
	r := b.leaderRoutes(map[string]bool{queue: true})[queue]
	switch {
	case r == nil:
		return errorf(CodeNodeNotReady, "no leader of queue %q is known yet (an election is under way); retry", queue)
	case r.LeaderAddr == "":
		return errorf(CodeNotLeader, "this node does not lead queue %q; node %d does (its address is not known yet: GetRoutes)", queue, r.LeaderNodeID)
	}
	e := errorf(CodeNotLeader, "this node does not lead queue %q; node %d at %s does", queue, r.LeaderNodeID, r.LeaderAddr)
	e.LeaderAddr = r.LeaderAddr
	return e
}

// ended reports whether the actor has stopped for good (its queue was deleted, or the broker
// closes).
func (a *actor) ended() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// deposed is what the subscriptions of a replica that stopped leading hear: NotLeader, with the
// address of the leader its Raft group knows, when it knows one already (a successor's first
// message may come after the demotion) and the meta state holds its address.
func (a *actor) deposed() *Error {
	e := errorf(CodeNotLeader, "this node no longer leads queue %q", a.name)
	if !a.b.clustered() || a.g == nil {
		return e
	}
	id := meta.NodeID(a.g.LeaderID())
	if id == "" || id == a.b.nodeID() {
		return e
	}
	if n, ok := a.b.catalog().Node(id); ok && n.Advertise != "" {
		e.LeaderAddr = n.Advertise
		e.Message += fmt.Sprintf("; node %s at %s does", id, n.Advertise)
	}
	return e
}
