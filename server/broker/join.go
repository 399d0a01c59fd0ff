package broker

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/raftgroup"
)

// Joining. A node that is not a founding member joins a running cluster through any member
// (Admit on that member, the node link's Join): the meta leader records it (PutNode, with its
// addresses) and adds it to the meta group as a non-voter. The node then starts its meta group
// empty (Cluster.Members is empty on a node that joined), is sent the meta log or a snapshot by
// the leader, and from then on hosts the queue replicas placement gives it, like any member.
//
// Every node tells its network where each member is (peerAdder) as its meta state records them:
// a node that joined is reached by the others once they applied its PutNode.

// peerAdder is an optional ability of a Network (the node link's): it learns, or relearns,
// where a node is reached.
type peerAdder interface {
	AddPeer(node meta.NodeID, addr string)
}

// joinForwarder is an optional ability of a Network: it hands a node's join to the meta leader
// (the leader's Admit) and returns the members it answers with.
type joinForwarder interface {
	ForwardJoin(leader meta.NodeID, n meta.Node, fresh bool) ([]meta.Node, uint64, error)
}

// joinTimeout bounds the meta group's configuration change that adds a node.
const joinTimeout = awaitTimeout

// joined reports whether this node joined a running cluster (it founded none): its meta group
// starts empty and is sent its state by the leader.
func (b *Broker) joined() bool {
	return b.opts.Cluster.Network != nil && len(b.opts.Cluster.Members) == 0
}

// Admit makes n a member of the cluster (see nodelink.Admitter) and returns the members, n
// among them, and the meta index its admission is applied at (0: a member already). A node the
// meta state records already, at the same address, and the meta group counts, is answered from
// this node's state (a joined node that restarts); another node with n's ID is refused. Otherwise
// the meta leader records n and adds it to the meta group as a non-voter; another node hands the
// request to the leader, unless it was handed on already (forwarded), when it answers
// raft.ErrNotLeader. A fresh node (an empty data directory) is judged by the leader alone
// (mayJoin): refused under a member's ID, taken under a removed one once its removal is complete.
func (b *Broker) Admit(n meta.Node, fresh, forwarded bool) ([]meta.Node, uint64, error) {
	g := b.metaGroupNow()
	if g == nil {
		return nil, 0, errNoMetaLeader
	}
	if !fresh {
		member, err := b.admitted(g, n)
		if err != nil || member {
			return b.catalog().Nodes(), 0, err
		}
	}
	if !g.Leader() {
		leader := g.LeaderID()
		fw, ok := b.opts.Cluster.Network.(joinForwarder)
		switch {
		case forwarded:
			return nil, 0, raft.ErrNotLeader
		case leader == "":
			return nil, 0, errNoMetaLeader
		case !ok:
			return nil, 0, errors.New("broker: this node's network hands no join on to the meta leader")
		}
		return fw.ForwardJoin(meta.NodeID(leader), n, fresh)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if err := b.mayJoin(g, n, fresh); err != nil { // looked at again, now that no change runs
		return nil, 0, err
	}
	if cur, ok := b.member(n.ID); !ok || cur.Address != n.Address || (n.Advertise != "" && cur.Advertise != n.Advertise) {
		if err := b.proposeMeta(meta.PutNode(n)); err != nil {
			return nil, 0, err
		}
	}
	if !inConfiguration(g, n.ID) {
		if err := g.AddNonvoter(raft.ServerID(n.ID), b.opts.Cluster.Network.Address(n.ID, MetaGroup), joinTimeout); err != nil {
			return nil, 0, err
		}
	}
	var at uint64
	if fresh && b.metaIndex != nil {
		at = b.metaIndex.Load() // its PutMember is applied here: at or before this index
	}
	b.log.Info("a node joined the cluster", "node_id", string(n.ID), "address", n.Address, "advertise", n.Advertise, "fresh", fresh)
	return b.catalog().Nodes(), at, nil
}

// mayJoin refuses a node that may not join under n's ID: a node started on an empty data
// directory (fresh) under the ID of a member, whose replicas would answer Raft without the log
// and votes the member had (the member's data directory was lost: it is removed first); a node
// with data under the ID of a removed node (a removed node does not come back); a fresh node
// under a removed ID whose removal is not complete; and what admitted refuses.
func (b *Broker) mayJoin(g *raftgroup.Group, n meta.Node, fresh bool) error {
	cat, id := b.catalog(), n.ID
	cur, member := b.member(id)
	refused := func(format string, args ...any) error {
		return &meta.Refused{Code: meta.CodeInvalidNode, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case fresh && member && cur.Address != n.Address:
		return refused("node ID %s is taken: node %s of this cluster is at %s, not %s; give the node that joins another ID. %s",
			id, id, cur.Address, n.Address, lostAdvice(id))
	case fresh && member:
		return refused("node %s is a member of this cluster with its data, and the node that joins as %s starts on an empty data "+
			"directory: its replicas would answer for node %s without the log and votes it had. %s", id, id, id, lostAdvice(id))
	case !fresh && cat.Removed(id):
		return refused("node %s was removed from this cluster, and its data directory is the removed node's: a removed node does "+
			"not come back with its data; give the ID to a node with an empty data directory once the removal is complete "+
			"(fila cluster members shows it \"removed (ID free)\")", id)
	case fresh && cat.Leaving(id) > 0:
		return refused("node %s was removed from this cluster and its removal is not complete: %d groups (the meta group counts) "+
			"may still hold it in their Raft configuration; wait until fila cluster members shows it \"removed (ID free)\", "+
			"then start it again", id, cat.Leaving(id))
	case fresh:
		return nil
	}
	_, err := b.admitted(g, n)
	return err
}

// admitted reports whether n is a member already, as this node's state says: recorded at its
// address (and advertised address, when it gives one) and in the meta group's configuration.
// Another node recorded with n's ID refuses n.
func (b *Broker) admitted(g *raftgroup.Group, n meta.Node) (bool, error) {
	cur, ok := b.member(n.ID)
	switch {
	case !ok:
		return false, nil
	case cur.Address != n.Address:
		return false, &meta.Refused{Code: meta.CodeInvalidNode, Message: fmt.Sprintf(
			"node ID %s is taken: node %s of this cluster is at %s, not %s; give the node that joins another ID "+
				"(a node that moved keeps its data directory and its address)", n.ID, n.ID, cur.Address, n.Address)}
	}
	return (n.Advertise == "" || cur.Advertise == n.Advertise) && inConfiguration(g, n.ID), nil
}

// lostAdvice is what to do when node id's data directory was lost.
func lostAdvice(id meta.NodeID) string {
	return fmt.Sprintf("If node %s's data directory was lost, remove it first (fila cluster remove %s --force, through another node), "+
		"wait until the removal is complete (fila cluster members shows it \"removed (ID free)\"), then start the replacement "+
		"with an empty data directory and --join", id, id)
}

// member is the node id as this node's meta state records it.
func (b *Broker) member(id meta.NodeID) (meta.Node, bool) {
	for _, n := range b.catalog().Nodes() {
		if n.ID == id {
			return n, true
		}
	}
	return meta.Node{}, false
}

// inConfiguration reports whether id is a member (voter or not) of g's latest configuration.
func inConfiguration(g *raftgroup.Group, id meta.NodeID) bool {
	servers, err := g.Members()
	if err != nil {
		return false
	}
	for _, s := range servers {
		if s.ID == raft.ServerID(id) {
			return true
		}
	}
	return false
}

// peers is what this node told its network of the members' addresses.
type peers struct {
	mu    sync.Mutex
	addrs map[meta.NodeID]string
}

// learnMembers tells the network where each member the catalog records is, when it has not been
// told that address yet.
func (b *Broker) learnMembers(cat *meta.Catalog) {
	pa, ok := b.opts.Cluster.Network.(peerAdder)
	if !ok {
		return
	}
	b.peers.mu.Lock()
	defer b.peers.mu.Unlock()
	if b.peers.addrs == nil {
		b.peers.addrs = map[meta.NodeID]string{}
	}
	for _, n := range cat.Nodes() {
		if n.Address != "" && b.peers.addrs[n.ID] != n.Address && n.ID != b.nodeID() {
			b.peers.addrs[n.ID] = n.Address
			pa.AddPeer(n.ID, n.Address)
		}
	}
}

// memberWatch is the meta state machine as the meta group runs it: after each entry and
// restore, the network learns the members' addresses (learnMembers).
type memberWatch struct {
	*meta.FSM
	b *Broker
}

func (w memberWatch) Apply(l *raft.Log) any {
	r := w.FSM.Apply(l)
	if l.Type == raft.LogCommand {
		w.b.learnMembers(w.FSM.Catalog())
	}
	return r
}

func (w memberWatch) Restore(rc io.ReadCloser) error {
	err := w.FSM.Restore(rc)
	w.b.learnMembers(w.FSM.Catalog())
	return err
}

// metaFSM is fsm as the meta group runs it: watched for members on a cluster node.
func (b *Broker) metaFSM(fsm *meta.FSM) raft.FSM {
	if _, ok := b.opts.Cluster.Network.(peerAdder); !ok {
		return fsm
	}
	return memberWatch{FSM: fsm, b: b}
}

// FounderServed reports whether the meta state records that node id served in the cluster, and
// the address it gave clients (nodelink.FounderRecords): it announced that address
// (SetAdvertise), which a node does once it runs, or it was removed. A founder that finds its
// data directory empty asks this of the others before it founds anything.
func (b *Broker) FounderServed(id meta.NodeID) (string, bool) {
	n, ok := b.member(id)
	if ok && n.Advertise != "" {
		return n.Advertise, true
	}
	return "", b.catalog().Removed(id)
}
