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
	ForwardJoin(leader meta.NodeID, n meta.Node) ([]meta.Node, error)
}

// joinTimeout bounds the meta group's configuration change that adds a node.
const joinTimeout = awaitTimeout

// joined reports whether this node joined a running cluster (it founded none): its meta group
// starts empty and is sent its state by the leader.
func (b *Broker) joined() bool {
	return b.opts.Cluster.Network != nil && len(b.opts.Cluster.Members) == 0
}

// Admit makes n a member of the cluster (see nodelink.Admitter) and returns the members, n
// among them. A node the meta state records already, at the same address, and the meta group
// counts, is answered from this node's state (a joined node that restarts); another node with
// n's ID is refused. Otherwise the meta leader records n and adds it to the meta group as a
// non-voter; another node hands the request to the leader, unless it was handed on already
// (forwarded), when it answers raft.ErrNotLeader.
func (b *Broker) Admit(n meta.Node, forwarded bool) ([]meta.Node, error) {
	g := b.metaGroupNow()
	if g == nil {
		return nil, errNoMetaLeader
	}
	member, err := b.admitted(g, n)
	if err != nil || member {
		return b.catalog().Nodes(), err
	}
	if !g.Leader() {
		leader := g.LeaderID()
		fw, ok := b.opts.Cluster.Network.(joinForwarder)
		switch {
		case forwarded:
			return nil, raft.ErrNotLeader
		case leader == "":
			return nil, errNoMetaLeader
		case !ok:
			return nil, errors.New("broker: this node's network hands no join on to the meta leader")
		}
		return fw.ForwardJoin(meta.NodeID(leader), n)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if _, err := b.admitted(g, n); err != nil { // looked at again, now that no change runs
		return nil, err
	}
	if cur, ok := b.member(n.ID); !ok || cur.Address != n.Address || (n.Advertise != "" && cur.Advertise != n.Advertise) {
		if err := b.proposeMeta(meta.PutNode(n)); err != nil {
			return nil, err
		}
	}
	if !inConfiguration(g, n.ID) {
		if err := g.AddNonvoter(raft.ServerID(n.ID), b.opts.Cluster.Network.Address(n.ID, MetaGroup), joinTimeout); err != nil {
			return nil, err
		}
	}
	b.log.Info("a node joined the cluster", "node_id", string(n.ID), "address", n.Address, "advertise", n.Advertise)
	return b.catalog().Nodes(), nil
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
