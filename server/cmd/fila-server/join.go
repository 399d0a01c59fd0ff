package main

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/nodelink"
)

// A node that is not a founding member joins a running cluster (join: any member's inter-node
// address) on its first start: its link listens, then it asks the member to admit it (its ID,
// the address the others dial, its advertised FIBP address), again with backoff while the member
// is unreachable or the cluster has no meta leader. Admitted, it learns the cluster's name and
// members, writes them into its identity file, and starts its broker as a member that joined
// (its meta group empty, sent by the leader). A restart needs no join: the identity file has
// the cluster. Given on a restart, join is asked again, which checks that the member is of the
// cluster the data directory belongs to.

// needsJoin reports whether this start asks a member to admit the node: a node never admitted
// (its identity has no cluster), or one given join again.
func needsJoin(cfg config.Config, id nodeIdentity) bool {
	return cfg.Join != "" || (id.ClusterID == "" && id.JoinedThrough != "")
}

// joinCluster asks the member at join (cfg.Join, else the one the node first joined through) to
// admit this node, whose link listens at link.Addr(); once admitted it records the cluster in
// the identity file, names the cluster to the link and tells it where the members are. A
// refusal is bad input: one line, exit 2.
func joinCluster(cfg config.Config, id *nodeIdentity, link *nodelink.Link, clientTLS *tls.Config, log *slog.Logger) error {
	through := cfg.Join
	if through == "" {
		through = id.JoinedThrough
	}
	self := meta.Node{ID: nodeName(cfg.NodeID), Address: link.Addr(), Advertise: advertised(cfg)}
	log.Info("joining the cluster", "through", through, "node_id", cfg.NodeID, "cluster_listen", self.Address)
	// A node never admitted has no cluster state: its data directory was empty (or it stopped
	// before its first admission was answered). It says so; under a member's ID it is refused.
	fresh := id.ClusterID == ""
	res, err := nodelink.Join(context.Background(), nodelink.JoinConfig{Through: through, Node: self, Cluster: id.ClusterID,
		Fresh: fresh, TLS: clientTLS, Logger: log})
	var refused *nodelink.JoinRefused
	if errors.As(err, &refused) {
		return badInput("node %d cannot join through %s: %s", cfg.NodeID, through, refused.Message)
	}
	if err != nil {
		return err
	}
	if id.ClusterID == "" {
		id.ClusterID, id.Members, id.AdmittedAt = res.Cluster, identityMembers(res.Members), res.AdmittedAt
		if id.JoinedThrough == "" {
			id.JoinedThrough = through
		}
		if err := writeIdentity(cfg.DataDir, filepath.Join(cfg.DataDir, identityFile), *id); err != nil {
			return err
		}
	}
	link.SetCluster(res.Cluster)
	for _, m := range res.Members {
		link.AddPeer(m.ID, m.Address)
	}
	log.Info("joined the cluster", "cluster", res.Cluster, "members", len(res.Members))
	return nil
}

// advertised is the FIBP address this node gives clients when it joins: advertise, else listen
// when it names a host and a port; empty when not known before the listener is bound.
func advertised(cfg config.Config) string {
	if cfg.Advertise != "" {
		return cfg.Advertise
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil || port == "0" || host == "" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return ""
	}
	return cfg.Listen
}

// identityMembers are nodes as the identity file lists them.
func identityMembers(nodes []meta.Node) []identityMember {
	out := make([]identityMember, len(nodes))
	for i, n := range nodes {
		out[i] = identityMember{NodeID: string(n.ID), Address: n.Address}
	}
	return out
}
