package nodelink_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/nodelink"
)

// A fourth broker joins the three through a member (nodelink.Join, the member's Broker.Admit):
// it starts its meta group empty and is sent the meta state, every node records it, it replicates
// a queue placed on it, and a Join that names a taken ID is refused.
func TestABrokerJoinsOverTheLink(t *testing.T) {
	nodes := startBrokers(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := nodelink.New(nodelink.Config{NodeID: "n4", Listen: "127.0.0.1:0", Logger: quiet}) // no cluster yet
	if err != nil {
		t.Fatal(err)
	}
	n4 := &node{link: l}
	t.Cleanup(n4.stop)
	join := func(n meta.Node) (nodelink.JoinResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net against a hang
		defer cancel()
		return nodelink.Join(ctx, nodelink.JoinConfig{Through: nodes["n2"].link.Addr(), Node: n, Logger: quiet})
	}
	self := meta.Node{ID: "n4", Address: l.Addr(), Advertise: "127.0.0.1:5554"}
	res, err := join(self)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cluster != "test" || len(res.Members) != 4 {
		t.Fatalf("joined %+v", res)
	}
	l.SetCluster(res.Cluster)
	for _, m := range res.Members {
		l.AddPeer(m.ID, m.Address)
	}
	o := broker.DefaultOptions(t.TempDir())
	o.Sync, o.IdleTimeout = false, -1
	o.Cluster = broker.Cluster{NodeID: "n4", Network: l, Replication: 4, HeartbeatTimeout: 150 * time.Millisecond}
	if n4.b, err = broker.Open(o); err != nil {
		t.Fatal(err)
	}
	l.SetHandler(n4.b)
	nodes["n4"] = n4
	eventually(t, "every node's meta state lists n4", func() bool {
		for _, n := range nodes {
			found := false
			for _, m := range n.b.Nodes() {
				found = found || m == self
			}
			if !found {
				return false
			}
		}
		return true
	})

	// Asked again, the answer comes from the member's state; another node's ID is refused.
	if again, err := join(self); err != nil || len(again.Members) != 4 {
		t.Fatalf("joining again: %+v, %v", again, err)
	}
	var refused *nodelink.JoinRefused
	if _, err := join(meta.Node{ID: "n1", Address: "127.0.0.1:1"}); !errors.As(err, &refused) {
		t.Fatalf("n1's ID at another address: %v, want it refused", err)
	}

	// A queue created on n4 with a replication of 4 lives on the four nodes; with a founder
	// other than its leader stopped, it commits only with n4's vote (three of four).
	if e := n4.b.CreateQueue(broker.QueueSpec{Name: "wide"}); e != nil {
		t.Fatal(e)
	}
	eventually(t, "wide has a leader", func() bool { return leaderOf(nodes, "wide") != "" })
	lead := leaderOf(nodes, "wide")
	eventually(t, "n4 replicates wide", func() bool {
		if lead == "n4" {
			return true
		}
		for _, r := range nodes[lead].link.ReplicaLag() {
			if r.Group == "wide" && r.Replica == "n4" {
				return true // n4 answered the leader's appends
			}
		}
		return false
	})
	for _, id := range []meta.NodeID{"n1", "n2", "n3"} {
		if id != lead {
			nodes[id].stop()
			delete(nodes, id)
			break
		}
	}
	eventually(t, "an enqueue to wide commits", func() bool {
		lead := leaderOf(nodes, "wide")
		return lead != "" && enqueue(t, nodes[lead].b, []broker.Message{{Queue: "wide", Payload: []byte("x")}})[0].Code == broker.CodeOk
	})
}
