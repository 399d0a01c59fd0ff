package service

// The cluster's side of the service: where each queue's leader is, and the nodes. A Service that
// runs as a node of a cluster implements Cluster too; the edges find it by a type assertion and
// describe a single node themselves when it is absent or says it is no cluster.

// Cluster is what a node of a cluster answers about the cluster, from its own copy of the meta
// state (an answer may be slightly stale: a stale answer costs the client a NotLeader, never a
// wrong result).
type Cluster interface {
	// ClusterNodes lists every node of the cluster by ID, and the meta group's leader (0 while
	// none is known); ok is false on a single node.
	ClusterNodes() (nodes []NodeStatus, metaLeader uint64, ok bool)
	// QueueRoutes answers the leader of each of queues (every queue when empty; a dead-letter
	// queue's is its queue's), or CodeQueueNotFound for the first that does not exist; ok is
	// false on a single node.
	QueueRoutes(queues []string) (routes []Route, ok bool, e *Error)
	// DrainNode starts (drain) or cancels the drain of node: it hands every leadership it holds
	// to other nodes, and keeps none, until the drain is cancelled. CodeNodeNotFound when no node
	// has the ID; ok is false on a single node.
	DrainNode(node uint64, drain bool) (ok bool, e *Error)
	// MoveQueueLeader moves the leadership of queue's group to node target and returns once
	// target leads it, or the move failed. CodeQueueNotFound for an unknown queue,
	// CodeNodeNotFound for an unknown node or one that does not replicate the queue; ok is false
	// on a single node.
	MoveQueueLeader(queue string, target uint64) (ok bool, e *Error)
	// SetAdvertise tells the node the FIBP address clients are given for it (the FIBP
	// listener's --advertise, or its bound address), which it records in the meta state.
	SetAdvertise(addr string)
}

// Route is where a queue's leader is.
type Route struct {
	Queue string
	// LeaderNodeID is the leader's node ID, 0 when this node does not know it; LeaderAddr its
	// FIBP address, empty when this node does not know it.
	LeaderNodeID uint64
	LeaderAddr   string
	// Shards are the leaders of a sharded queue's shards, by index (the queue's own leader
	// fields are shard 0's); nil for a queue that is not sharded.
	Shards []ShardRoute
}

// ShardRoute is where one shard of a sharded queue is led.
type ShardRoute struct {
	Index        uint32
	LeaderNodeID uint64 // 0 when this node does not know it
	LeaderAddr   string // empty when this node does not know it
}

// NodeState is what a node's peers see of it.
type NodeState uint8

const (
	NodeUp          NodeState = iota // this node, or a node this one is connected to
	NodeUnreachable                  // a node this one is not connected to
	NodeDraining                     // a node that is moving its leaderships away
)

// NodeStatus is one node of GetClusterStatus.
type NodeStatus struct {
	ID               uint64
	Addr             string // its advertised FIBP address (empty until it told it)
	State            NodeState
	QueueLeaderships uint32 // the queue groups it leads (dead-letter queues are their queue's)
}

// Sharding is what a Service with sharded queues answers about them; the edges find it by a type
// assertion. A sharded queue's admin requests about the whole queue (GetStats, UpdateQueue, a
// purge of its dead-letter queue, Redrive, ListQueues) are carried out on each shard's group,
// named by ShardGroup, and their answers combined.
type Sharding interface {
	// ShardCount is how many shards queue (or the queue of dead-letter queue queue) has: 1 when
	// it is not sharded, 0 when no queue has the name.
	ShardCount(queue string) uint32
}
