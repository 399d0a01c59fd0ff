package nodelink_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
)

// Auth freshness over the links (docs/cluster.md, "Auth freshness"): a node's copy of the keys
// counts as current only while it leads the meta group or has heard from its leader within
// auth.max_staleness_ms. The edges (FIBP, the admin API) refuse keys with AuthStateStale while
// the store says it is not (auth.Store.Fresh); these tests look at the stores themselves.

const testStaleness = time.Second

// startAuthBrokers starts three brokers named 1, 2 and 3 (numbers, as fila-server names them, so
// that ClusterNodes names the meta leader) with authentication on and a bound of testStaleness.
func startAuthBrokers(t *testing.T) map[meta.NodeID]*node {
	t.Helper()
	return startBrokersWith(t, []meta.NodeID{"1", "2", "3"}, func(o *broker.Options) {
		o.Sync = false
		o.BootstrapAPIKey = "bootstrap-secret-of-at-least-32-characters"
		o.Cluster.HeartbeatTimeout = 150 * time.Millisecond
		o.Cluster.AuthMaxStaleness = testStaleness
	}, "every node's meta state lists the three members and is current", func(n *node) bool { return n.b.Auth().Fresh() })
}

// metaLeader is the node that leads the meta group as node from sees it ("" while none).
func metaLeader(n *node) meta.NodeID {
	if _, l, ok := n.b.ClusterNodes(); ok && l != 0 {
		return meta.NodeID(fmt.Sprint(l))
	}
	return ""
}

// refuses reports whether n would refuse secret now: its copy no longer holds the key, or cannot
// be confirmed current.
func refuses(n *node, secret string) bool {
	st := n.b.Auth()
	_, ok := st.Authenticate(secret)
	return !ok || !st.Fresh()
}

// A key revoked through one node is refused by every node within the bound: the two that hear
// the meta leader apply the revocation; a node cut off from it holds the key still, but answers
// stale once the bound has passed, and is current, without the key, once healed.
func TestARevokedKeyIsRefusedOnEveryNode(t *testing.T) {
	nodes := startAuthBrokers(t)
	key, e := nodes["1"].b.CreateAPIKey("tenant", 0, false)
	if e != nil {
		t.Fatal(e)
	}
	eventually(t, "every node knows the new key", func() bool {
		for _, n := range nodes {
			if refuses(n, key.Secret) {
				return false
			}
		}
		return true
	})

	// Revoked through a node that does not lead the meta group: every node refuses the key.
	lead := metaLeader(nodes["1"])
	through := nodes["1"]
	if lead == "1" {
		through = nodes["2"]
	}
	if e := through.b.RevokeAPIKey(key.ID); e != nil {
		t.Fatal(e)
	}
	start := time.Now()
	eventually(t, "every node refuses the revoked key", func() bool {
		for _, n := range nodes {
			if !refuses(n, key.Secret) {
				return false
			}
		}
		return true
	})
	t.Logf("revoked through node %s (meta leader %s): every node refused the key %v later", through.b.NodeID(), lead, time.Since(start))
	for id, n := range nodes {
		if !n.b.Auth().Fresh() {
			t.Errorf("node %s: stale with the meta leader in reach", id)
		}
	}
}

// A node cut off from the meta leader answers stale once the bound has passed, while the key it
// holds was revoked meanwhile on the others, and is current again when healed. Cut off first: a
// follower; then the meta leader itself (it stops counting as the leader once its lease lapses).
func TestACutOffNodeGoesStaleAndRecovers(t *testing.T) {
	nodes := startAuthBrokers(t)
	for _, which := range []string{"follower", "meta leader"} {
		lead := metaLeader(nodes["1"])
		if lead == "" {
			eventually(t, "a meta leader", func() bool { lead = metaLeader(nodes["1"]); return lead != "" })
		}
		cut := lead
		if which == "follower" {
			for id := range nodes {
				if id != lead {
					cut = id
					break
				}
			}
		}
		var key broker.APIKeyCreated
		eventually(t, "a key is created", func() bool { // the heal before may have started an election
			var e *broker.Error
			key, e = nodes[lead].b.CreateAPIKey("tenant of "+which, 0, false)
			return e == nil
		})
		eventually(t, "every node knows the new key", func() bool {
			for _, n := range nodes {
				if refuses(n, key.Secret) {
					return false
				}
			}
			return true
		})

		partition(nodes, cut)
		cutAt := time.Now()
		var other meta.NodeID
		eventually(t, "the others agree on a meta leader", func() bool {
			for id, n := range nodes {
				if id != cut {
					if l := metaLeader(n); l != "" && l != cut {
						other = id
						return true
					}
				}
			}
			return false
		})
		eventually(t, "the revocation on the others' side commits", func() bool {
			e := nodes[other].b.RevokeAPIKey(key.ID) // an attempt that failed may have committed
			return e == nil || e.Code == broker.CodeAPIKeyNotFound
		})
		eventually(t, "the cut-off "+which+" answers stale", func() bool { return !nodes[cut].b.Auth().Fresh() })
		staleAfter := time.Since(cutAt)
		if _, ok := nodes[cut].b.Auth().Authenticate(key.Secret); !ok {
			t.Errorf("the cut-off %s applied a revocation it cannot have heard of", which)
		}
		eventually(t, "the nodes in reach of the meta leader refuse the revoked key", func() bool {
			for id, n := range nodes {
				if id != cut && !refuses(n, key.Secret) {
					return false
				}
			}
			return true
		})

		heal(nodes, cut)
		eventually(t, "the healed "+which+" is current and refuses the key for its revocation", func() bool {
			st := nodes[cut].b.Auth()
			_, ok := st.Authenticate(key.Secret)
			return st.Fresh() && !ok
		})
		t.Logf("%s %s cut off: stale %v later (bound %v), current again %v after the heal", which, cut, staleAfter, testStaleness, time.Since(cutAt)-staleAfter)
	}
}

// partition cuts node off from the others, both ways.
func partition(nodes map[meta.NodeID]*node, cut meta.NodeID) {
	for id, n := range nodes {
		if id != cut {
			n.link.Partition(cut)
			nodes[cut].link.Partition(id)
		}
	}
}

func heal(nodes map[meta.NodeID]*node, cut meta.NodeID) {
	for id, n := range nodes {
		if id != cut {
			n.link.Heal(cut)
			nodes[cut].link.Heal(id)
		}
	}
}
