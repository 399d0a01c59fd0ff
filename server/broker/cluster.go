package broker

import (
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/raftgroup"
)

// A node of a cluster runs the same code as a single node: every queue group and the meta group
// are Raft groups, of this node alone or of several. Cluster says which nodes and how they reach
// each other; the inter-node link itself is the Network's (the next step is one connection per
// node pair carrying every group; tests connect in-process nodes with hashicorp/raft's in-memory
// transports).

// Cluster places the node in a cluster. The zero value is a single node: the groups' only member
// is "local", as every store written before clusters holds it.
type Cluster struct {
	// NodeID is this node's ID, its Raft server ID in every group ("local" when empty).
	NodeID string
	// Network connects this node's groups to the other nodes' (nil: a single node).
	Network Network
	// Members are the meta group's founding voters, this node among them, the same list on every
	// node. Each is recorded in the meta state (PutNode) once the group has a leader; placement
	// puts queue groups on them.
	Members []meta.Node
	// Replication is how many nodes replicate a new queue group (0: meta's default, 3), capped by
	// the members.
	Replication int
	// HeartbeatTimeout is the groups' Raft heartbeat timeout (raftgroup's default when 0).
	HeartbeatTimeout time.Duration
	// AuthMaxStaleness bounds how long after the meta group's leader was last heard from the node
	// still answers authenticated requests (authfresh.go; DefaultAuthMaxStaleness when 0).
	AuthMaxStaleness time.Duration
	// AdmittedAt is the meta index at which this node, started on an empty data directory, was
	// admitted under the ID of a removed node (0: it was not): the meta state it is sent applies
	// that node's removal before its own admission, which this node does not take for its own
	// (selfRemoved).
	AdmittedAt uint64
}

// Network gives this node's Raft groups their transports.
type Network interface {
	// Transport returns the transport of this node's member of group.
	Transport(group string) (raft.Transport, error)
	// Address is where node's member of group is reached.
	Address(node meta.NodeID, group string) raft.ServerAddress
	// ProposeMeta hands a meta entry to node, which leads the meta group (its Broker.ProposeMeta),
	// and returns the entry's log index once it is applied there, or why it failed (a command
	// the meta state refused answers its *meta.Refused).
	ProposeMeta(node meta.NodeID, entry []byte) (uint64, error)
}

// errNoMetaLeader answers a meta change while this node knows no meta leader (an election).
var errNoMetaLeader = errors.New("broker: no leader of the meta group is known (an election is under way); retry")

// ProposeMeta proposes a meta entry another node handed over (Network.ProposeMeta), as this
// node's own changes are proposed, and returns its log index once applied here.
func (b *Broker) ProposeMeta(entry []byte) (uint64, error) {
	g := b.metaGroupNow()
	if g == nil || !g.Leader() {
		return 0, raft.ErrNotLeader
	}
	f := g.Propose(entry)
	if err := f.Error(); err != nil {
		return 0, err
	}
	if err, ok := f.Response().(error); ok {
		return f.Index(), err
	}
	return f.Index(), nil
}

// metaGroupNow is the meta group's Raft group (nil while a failed write has it stopped).
func (b *Broker) metaGroupNow() *raftgroup.Group {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.metaGroup
}

// setMetaGroup replaces the meta group's Raft group; the caller holds adminMu.
func (b *Broker) setMetaGroup(g *raftgroup.Group) {
	b.mu.Lock()
	b.metaGroup = g
	b.mu.Unlock()
}

// MetaGroup names the meta group to a Network. It is no valid queue name (it has a *).
const MetaGroup = "*meta"

// nodeID is this node's ID.
func (b *Broker) nodeID() meta.NodeID {
	if b.opts.Cluster.NodeID == "" {
		return "local"
	}
	return meta.NodeID(b.opts.Cluster.NodeID)
}

// groupPeers is a group's first configuration: its replicas, at their addresses (none for a
// single node, which bootstraps alone), but the joining ones, which its leader adds (a group
// placed while no member was known, topped up by the members recorded after: meta's PutMember).
func (b *Broker) groupPeers(group string, replicas []meta.NodeID) []raft.Server {
	net := b.opts.Cluster.Network
	if net == nil {
		return nil
	}
	var joining []meta.NodeID
	if group != MetaGroup {
		if a, ok := b.catalog().Assignment(group); ok && a.Name() == group {
			joining = a.Joining
		}
	}
	out := make([]raft.Server, 0, len(replicas))
	for _, id := range replicas {
		if !slices.Contains(joining, id) {
			out = append(out, raft.Server{ID: raft.ServerID(id), Address: net.Address(id, group)})
		}
	}
	return out
}

// recordMembers proposes the founding members the meta state does not list yet, once this node
// leads the meta group (a cluster's first start): placement needs them.
func (b *Broker) recordMembers() error {
	if len(b.opts.Cluster.Members) == 0 {
		return nil
	}
	known := map[meta.NodeID]bool{}
	for _, n := range b.catalog().Nodes() {
		known[n.ID] = true
	}
	var cmds []queuelog.Frame
	cat := b.catalog()
	for _, n := range b.opts.Cluster.Members {
		if !known[n.ID] && !cat.Removed(n.ID) { // a founder removed since is no member again
			cmds = append(cmds, meta.PutNode(n))
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	return b.proposeMeta(cmds...)
}

// queueCommitTimeout is a replicated queue group's raft CommitTimeout: how often its leader,
// with nothing new to send, tells each follower its commit index again. raft's 50 ms made every
// awake group cost two such requests and their answers every 50-100 ms; with a thousand busy
// queues each getting a few messages a second, that was most of the nodes' work (1,000 groups:
// 134 µs of CPU per message against 17 µs for 10). A follower learns a commit with the next
// entry anyway, so this only delays when it applies the last entries of a burst, which nothing
// waits for but a Hibernate entry (sleepHearTimeout). The meta group keeps raft's 50 ms: a
// follower that is asked for a queue it does not know waits for it (metafresh.go).
const queueCommitTimeout = 250 * time.Millisecond

// commitTimeoutOf is group's CommitTimeout (0: raftgroup's default).
func commitTimeoutOf(group string) time.Duration {
	if group == MetaGroup {
		return 0
	}
	return queueCommitTimeout
}

// leadsFirst reports whether this node is to stand for the first election of a new group at once
// (raftgroup.Config.DeferElection): when it is the group's preferred leader (the placement's,
// passed over while it drains), so that new groups' leaders spread as the placement spreads them
// rather than landing on the nodes that applied the CreateQueue first. The meta group, a group
// of one node and a group the catalog does not place elect at once everywhere.
func (b *Broker) leadsFirst(group string, replicas []meta.NodeID) bool {
	if group == MetaGroup || len(replicas) <= 1 {
		return true
	}
	cat := b.catalog()
	a, ok := cat.Assignment(group)
	if !ok || len(a.Replicas) == 0 {
		return true
	}
	return preferredLeader(cat, &a) == b.nodeID()
}
