package broker

import (
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/raftgroup"
)

// Completing a removal, so that the removed node's ID can be given to a new node (a replacement
// after a disk loss). The meta state records, per removed node, the groups whose Raft
// configuration may still hold it (meta.RemoveMember): every group it replicated and the meta
// group. Each group's leader, once the node is out of its configuration (settleGroup takes it
// out), makes sure that configuration is committed (a Barrier after reading it) and records it
// (meta.ReplicaLeft); the meta group's leader does the same for the meta group (settleMeta).
// Only then is an empty node under the ID harmless: no group would take it for the removed one,
// whose log and votes it lacks.
//
// A group that sleeps on every node is woken by its replicas' workers, as for a joining replica
// (pass). A group with no leader at all (every replica lost) records nothing: the removed ID stays
// held ("removing (N groups left)" in fila cluster members) until the queue is deleted.
//
// A node started on an empty data directory says so when it joins (Join's fresh, mayJoin): the
// meta leader refuses it under a member's ID, and takes it under a removed one once released. Its
// admission index (Cluster.AdmittedAt) tells it which removal of its ID is the old node's: it does
// not stop for it (selfRemoved), its start waits until its meta state is past it before the
// registry acts on the state (awaitMetaCurrent, bounded by metaCatchUpTimeout), and, should the
// registry carry out the old removal all the same (a start past that bound), a replica closed for
// it keeps its data (beforeAdmission): opened again as the state moves on, it is the replica it
// was, never an empty voter.

// reportLeft records, for group, which this node leads and whose configuration matches its
// placement, that the removed nodes in leaving are out of its configuration.
func (w *memberWorker) reportLeft(group string, a *actor, leaving []meta.NodeID) error {
	var g *raftgroup.Group
	if !a.call(func(a *actor) { g = a.g }) || g == nil {
		return nil
	}
	servers, err := g.Members()
	if err != nil {
		return err
	}
	if err := w.b.proposeLeft(g, group, servers, leaving); err != nil {
		return w.b.memberFailed(group, err)
	}
	return nil
}

// reportMetaLeft records that the removed nodes the meta group's configuration servers no longer
// holds are out of it; g is the meta group, which this node leads.
func (b *Broker) reportMetaLeft(g *raftgroup.Group, cat *meta.Catalog, servers []raft.Server) {
	leaving := cat.MetaLeaving()
	if len(leaving) == 0 {
		return
	}
	if err := b.proposeLeft(g, meta.MetaGroupName, servers, leaving); err != nil && !leadershipLost(err) {
		b.log.Warn("recording a removed node out of the meta group failed; retrying", "err", err)
	}
}

// proposeLeft proposes ReplicaLeft for each node of leaving that servers (g's configuration, read
// before) does not hold, once a Barrier has committed that configuration.
func (b *Broker) proposeLeft(g *raftgroup.Group, group string, servers []raft.Server, leaving []meta.NodeID) error {
	var cmds []meta.NodeID
	for _, id := range leaving {
		if _, in := findServer(servers, id); !in {
			cmds = append(cmds, id)
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if err := g.Barrier(memberTimeout); err != nil {
		return err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	for _, id := range cmds {
		if err := b.proposeMeta(meta.ReplicaLeft(group, id)); err != nil {
			return err
		}
		b.log.Info("a removed node is out of a group's Raft configuration", "queue", group, "node_id", string(id))
	}
	return nil
}

// beforeAdmission reports whether this node, admitted under a removed node's ID, holds a meta
// state from before its admission that says this ID is removed: the old node's removal.
func (b *Broker) beforeAdmission() bool {
	at := b.opts.Cluster.AdmittedAt
	return at != 0 && b.metaIndex != nil && b.metaIndex.Load() < at && b.catalog().Removed(b.nodeID())
}

// selfRemoved reports whether the meta state says this node was removed: a removal applied
// before this node's admission under a removed node's ID (Cluster.AdmittedAt) is the old node's.
func (b *Broker) selfRemoved(cat *meta.Catalog) bool {
	if !cat.Removed(b.nodeID()) {
		return false
	}
	at := b.opts.Cluster.AdmittedAt
	return at == 0 || b.metaIndex == nil || b.metaIndex.Load() >= at
}
