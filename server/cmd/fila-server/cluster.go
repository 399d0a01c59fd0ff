package main

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/nodelink"
)

// nodeName is a node ID as the meta state and Raft name it.
func nodeName(id uint64) meta.NodeID { return meta.NodeID(strconv.FormatUint(id, 10)) }

// openLink starts a cluster node's link to the other nodes (server/nodelink), listening on
// cluster_listen, and places the broker in the cluster (bo.Cluster); nil for a single node. The
// founders come from the data directory's identity (written from initial_cluster on the first
// start, which a restart need not give again).
func openLink(cfg config.Config, id nodeIdentity, bo *broker.Options, log *slog.Logger) (*nodelink.Link, error) {
	if !cfg.Clustered() {
		return nil, nil
	}
	members, err := config.ParseInitialCluster(id.Founders)
	if err != nil {
		return nil, fmt.Errorf("%s: the founders %q: %w", identityFile, id.Founders, err)
	}
	if members == nil {
		return nil, badInput("node %d of %s: joining a running cluster (join) is not built yet (issue 29); "+
			"found a cluster with initial_cluster, or start without node_id and the cluster settings to run a single node", id.NodeID, id.cluster())
	}
	self := nodeName(cfg.NodeID)
	peers := map[meta.NodeID]string{}
	nodes := make([]meta.Node, len(members))
	for i, m := range members {
		nodes[i] = meta.Node{ID: nodeName(m.ID), Address: m.Addr}
		if nodes[i].ID != self {
			peers[nodes[i].ID] = m.Addr
		}
	}
	link, err := nodelink.New(nodelink.Config{Cluster: id.ClusterID, NodeID: self, Listen: cfg.ClusterListen, Peers: peers, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("cluster_listen: %w", err)
	}
	bo.Cluster = broker.Cluster{NodeID: string(self), Network: link, Members: nodes, Replication: cfg.Replication}
	log.Info("cluster node", "node_id", cfg.NodeID, "cluster", id.ClusterID, "cluster_listen", link.Addr(), "founders", id.Founders)
	return link, nil
}
