package broker

import "github.com/filamq/fila/server/meta"

// What the admin HTTP API shows of the node beside the FIBP admin answers.

// NodeID is this node's ID ("local" for a single node).
func (b *Broker) NodeID() string { return string(b.nodeID()) }

// Clustered reports whether the node is a member of a cluster (Options.Cluster.Network set).
func (b *Broker) Clustered() bool { return b.opts.Cluster.Network != nil }

// Nodes are the cluster's members as the meta state records them (none for a single node).
func (b *Broker) Nodes() []meta.Node { return b.catalog().Nodes() }

// ThrottleNames lists the throttles live subscriptions declare, sorted.
func (b *Broker) ThrottleNames() []string { return b.throttles.Names() }
