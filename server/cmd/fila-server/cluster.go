package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/filamq/fila/generated/fibp"
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
// start, which a restart need not give again); a node that is no founder joins through a member
// first (join.go), and records the cluster in its identity.
func openLink(cfg config.Config, id nodeIdentity, bo *broker.Options, log *slog.Logger) (*nodelink.Link, error) {
	if !cfg.Clustered() {
		return nil, nil
	}
	founders, err := config.ParseInitialCluster(id.Founders)
	if err != nil {
		return nil, fmt.Errorf("%s: the founders %q: %w", identityFile, id.Founders, err)
	}
	self := nodeName(cfg.NodeID)
	peers := map[meta.NodeID]string{}
	nodes := make([]meta.Node, len(founders))
	for i, m := range founders {
		nodes[i] = meta.Node{ID: nodeName(m.ID), Address: m.Addr}
	}
	for _, m := range founders {
		if nodeName(m.ID) != self {
			peers[nodeName(m.ID)] = m.Addr
		}
	}
	for _, m := range id.Members { // a node that joined: the members when it did
		if meta.NodeID(m.NodeID) != self {
			peers[meta.NodeID(m.NodeID)] = m.Address
		}
	}
	serverTLS, clientTLS, err := linkTLS(cfg)
	if err != nil {
		return nil, err
	}
	link, err := nodelink.New(nodelink.Config{Cluster: id.ClusterID, NodeID: self, Listen: cfg.ClusterListen, Peers: peers,
		ServerTLS: serverTLS, ClientTLS: clientTLS, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("cluster_listen: %w", err)
	}
	if needsJoin(cfg, id) {
		if err := joinCluster(cfg, &id, link, clientTLS, log); err != nil {
			link.Close()
			return nil, err
		}
	}
	// A founder's meta group starts from the founders; a node that joined starts its empty
	// (no Members), and the meta leader sends it the state.
	bo.Cluster = broker.Cluster{NodeID: string(self), Network: link, Members: nodes, Replication: cfg.Replication,
		HeartbeatTimeout: cfg.ClusterHeartbeatTimeout, AuthMaxStaleness: cfg.Auth.MaxStaleness(), AdmittedAt: id.AdmittedAt}
	log.Info("cluster node", "node_id", cfg.NodeID, "cluster", id.ClusterID, "cluster_listen", link.Addr(), "founders", id.Founders,
		"joined_through", id.JoinedThrough, "tls", serverTLS != nil)
	return link, nil
}

// linkTLS is the inter-node link's mutual TLS (cluster_tls_*; nil, nil without): each node
// accepts only peers whose certificate chains to cluster_tls_ca and presents its own
// cluster_tls_cert both when it accepts and when it dials.
func linkTLS(cfg config.Config) (server, client *tls.Config, err error) {
	if cfg.ClusterTLSCert == "" {
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.ClusterTLSCert, cfg.ClusterTLSKey)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster_tls_cert %s and cluster_tls_key %s: %w", cfg.ClusterTLSCert, cfg.ClusterTLSKey, err)
	}
	pem, err := os.ReadFile(cfg.ClusterTLSCA)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster_tls_ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("cluster_tls_ca %s: no certificates found", cfg.ClusterTLSCA)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// linkAdmin hands a cluster node's admin requests about queues other nodes lead to those nodes
// over the node link (transport.AdminForwarder).
type linkAdmin struct{ l *nodelink.Link }

// forwardAdminTimeout bounds an admin request handed to another node (an UpdateQueue there waits
// for the meta group and its own group, at most about as long).
const forwardAdminTimeout = 15 * time.Second

func (a linkAdmin) ForwardAdmin(node uint64, op fibp.Opcode, body []byte) (fibp.Opcode, []byte, error) {
	aop, abody, err := a.l.ForwardAdmin(nodeName(node), uint8(op), body, forwardAdminTimeout)
	return fibp.Opcode(aop), abody, err
}
