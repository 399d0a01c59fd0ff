package nodelink_test

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// Three brokers over the link (node IDs as FIBP numbers them): MoveQueueLeader through a node
// that does not lead the queue moves it to the target (MoveLeader over the link); DrainNode
// through another node leaves the drained node leading no queue nor the meta group, shown
// draining; cancelled, it shows up again. Run under -race, it covers the drainer's goroutines.
func TestDrainAndMoveOverTheLink(t *testing.T) {
	ids := []meta.NodeID{"1", "2", "3"}
	nodes := startBrokersWith(t, ids, func(o *broker.Options) { o.IdleTimeout = -1 }, "")
	queues := []string{"q0", "q1", "q2", "q3"}
	for _, q := range queues {
		if e := nodes["1"].b.CreateQueue(broker.QueueSpec{Name: q}); e != nil {
			t.Fatal(e)
		}
	}
	leader := func(q string) meta.NodeID {
		for id, n := range nodes {
			if n.b.Leads(q) {
				return id
			}
		}
		return ""
	}
	for _, q := range queues {
		eventually(t, q+" has a leader", func() bool { return leader(q) != "" })
	}

	// Move q0 to each node in turn, through a node that does not lead it.
	for i, target := range ids {
		var via meta.NodeID
		for _, id := range ids {
			if id != leader("q0") && id != target {
				via = id
			}
		}
		if via == "" {
			via = ids[(i+1)%3]
		}
		if ok, e := nodes[via].b.MoveQueueLeader("q0", uint64(i+1)); !ok || e != nil {
			t.Fatalf("move q0 to %s through %s: %v %v", target, via, ok, e)
		}
		eventually(t, fmt.Sprintf("node %s leads q0", target), func() bool { return nodes[target].b.Leads("q0") })
	}
	if _, e := nodes["2"].b.MoveQueueLeader("q0", 7); e == nil || e.Code != service.CodeNodeNotFound {
		t.Errorf("move to node 7: %v", e)
	}
	if _, e := nodes["2"].b.MoveQueueLeader("nope", 1); e == nil || e.Code != service.CodeQueueNotFound {
		t.Errorf("move of an unknown queue: %v", e)
	}
	if _, e := nodes["2"].b.DrainNode(7, true); e == nil || e.Code != service.CodeNodeNotFound {
		t.Errorf("drain of node 7: %v", e)
	}

	// Drain node 3 (it leads q0) through node 1; a move to it is refused meanwhile.
	if _, e := nodes["1"].b.DrainNode(3, true); e != nil {
		t.Fatal(e)
	}
	if _, e := nodes["1"].b.MoveQueueLeader("q1", 3); e == nil || e.Code != service.CodeInvalidConfigValue {
		t.Errorf("move to the draining node: %v, want InvalidConfigValue", e)
	}
	eventually(t, "node 3 leads nothing and every node shows it draining", func() bool {
		for _, q := range queues {
			if l := leader(q); l == "" || l == "3" {
				return false
			}
		}
		for _, n := range nodes {
			st, metaLeader, _ := n.b.ClusterNodes()
			if metaLeader == 3 || metaLeader == 0 || st[2].State != service.NodeDraining || st[2].QueueLeaderships != 0 {
				return false
			}
		}
		return true
	})
	if _, e := nodes["2"].b.DrainNode(3, false); e != nil {
		t.Fatal(e)
	}
	eventually(t, "node 3 is up again", func() bool {
		for _, n := range nodes {
			if st, _, _ := n.b.ClusterNodes(); st[2].State != service.NodeUp {
				return false
			}
		}
		return true
	})
}
