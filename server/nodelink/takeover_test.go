package nodelink_test

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// A takeover of a committed queue serves at once although its node cannot confirm its copy of
// the meta state current (docs/cluster.md, "Failover"; server/broker/reclaim.go): five nodes, a
// queue of three replicas; the node leading the meta group goes away with the queue's leader
// (killed, or cut off with the two nodes that do not replicate the queue), so the queue's two
// other replicas elect a queue leader but no meta leader. The new leader answers an enqueue and
// delivers the new message, and holds the one pending at the takeover; once the nodes are
// reconnected and the meta state is confirmed, the queue, committed, ends the hold — its reclaim
// grace is an hour, so a takeover that held as if the queue were fast would not deliver it.
func TestATakeoverServesBeforeItsMetaStateIsConfirmed(t *testing.T) {
	ids := []meta.NodeID{"1", "2", "3", "4", "5"}
	nodes := startBrokersWith(t, ids, func(o *broker.Options) {
		o.Sync = false
		o.IdleTimeout = -1
		o.Cluster.HeartbeatTimeout = 150 * time.Millisecond
		o.Cluster.Replication = 3
	}, "")
	if e := nodes["1"].b.SetRebalancing(broker.RebalancingDisabled, 0); e != nil {
		t.Fatal(e)
	}
	if e := nodes["1"].b.CreateQueue(broker.QueueSpec{Name: "q", ReclaimGraceMs: uint64(time.Hour.Milliseconds())}); e != nil {
		t.Fatal(e)
	}
	var replicas, others []meta.NodeID
	eventually(t, "q is replicated on three nodes and led", func() bool {
		replicas, others = nil, nil
		for _, id := range ids {
			if nodes[id].b.Replicates("q") {
				replicas = append(replicas, id)
			} else {
				others = append(others, id)
			}
		}
		return len(replicas) == 3 && leaderOf(nodes, "q") != ""
	})
	var metaLead meta.NodeID
	eventually(t, "the meta group has a leader", func() bool { metaLead = metaLeader(nodes["1"]); return metaLead != "" })
	// The queue's leader is to go away with the meta leader: when the meta leader replicates the
	// queue, it takes the queue's leadership.
	if slices.Contains(replicas, metaLead) {
		eventually(t, "the meta leader leads q", func() bool {
			if l := leaderOf(nodes, "q"); l != "" && l != metaLead {
				_ = nodes[l].b.TransferLeadership("q", raft.ServerID(metaLead), nodes[l].link.Address(metaLead, "q"))
			}
			return nodes[metaLead].b.Leads("q")
		})
	}
	old := leaderOf(nodes, "q")
	// Right after a transfer the new leader may answer NodeNotReady until its queue is ready
	// (nothing enqueued): the client's answer is to try again.
	eventually(t, "the leader takes the pending message", func() bool {
		switch rs := enqueue(t, nodes[old].b, []broker.Message{{Queue: "q", Payload: []byte("pending")}}); rs[0].Code {
		case broker.CodeOk:
			return true
		case broker.CodeNodeNotReady:
			return false
		default:
			t.Fatalf("enqueue before the faults: %v", rs[0].Code)
			return false
		}
	})
	for _, cut := range others {
		for _, id := range ids {
			if id != cut {
				nodes[cut].link.Partition(id)
				nodes[id].link.Partition(cut)
			}
		}
	}
	nodes[old].stop()
	var survivors []meta.NodeID
	for _, id := range replicas {
		if id != old {
			survivors = append(survivors, id)
		}
	}
	var lead meta.NodeID
	eventually(t, "a surviving replica leads q", func() bool {
		for _, id := range survivors {
			if nodes[id].b.Leads("q") {
				lead = id
			}
		}
		return lead != ""
	})
	eventually(t, "the new leader takes an enqueue", func() bool {
		rs, e := enqueueWithin(t, nodes[lead].b, []broker.Message{{Queue: "q", Payload: []byte("after")}})
		return e == nil && rs[0].Code == broker.CodeOk
	})
	s := &sink{ch: make(chan service.Delivery, 10)}
	if _, e := nodes[lead].b.Subscribe(broker.SubscribeRequest{Queue: "q", ConsumerID: "c", Credit: 10}, s); e != nil {
		t.Fatal(e)
	}
	if p := next(t, s); p != "after" {
		t.Fatalf("the new leader delivered %q first, want the message enqueued after the takeover", p)
	}
	// No meta leader can be elected among the two survivors: the pending message is still held.
	if row, e := nodes[lead].b.QueueSummary("q"); e != nil || row.Held != 1 {
		t.Fatalf("the new leader holds %d messages (%v), want the one pending at the takeover", row.Held, e)
	}
	for _, cut := range others {
		for _, id := range ids {
			if id != cut {
				nodes[cut].link.Heal(id)
				nodes[id].link.Heal(cut)
			}
		}
	}
	for p := next(t, s); p != "pending"; p = next(t, s) {
		if p != "after" { // "after" again: an enqueue that timed out and was sent again took effect
			t.Fatalf("delivered %q, want the message pending at the takeover", p)
		}
	}
}

// next returns the payload of s's next delivery, within a minute.
func next(t *testing.T, s *sink) string {
	t.Helper()
	select {
	case d := <-s.ch:
		return string(d.Payload)
	case <-time.After(time.Minute):
		t.Fatal("no delivery within a minute (the held message: still held?)")
		return ""
	}
}
