package nodelink_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/nodelink"
	"github.com/filamq/fila/server/service"
)

// awakeReplicas counts the queue replicas running on the nodes (the others sleep).
func awakeReplicas(nodes map[meta.NodeID]*node) int {
	n := 0
	for _, nd := range nodes {
		if nd.b != nil {
			n += nd.b.AwakeQueues()
		}
	}
	return n
}

// enqueueAll enqueues msgs through whichever node answers Ok for them: the group's leader, a
// sleeping one too (its request wakes the group; a node that answers NotLeader stored nothing).
func enqueueAll(t *testing.T, nodes map[meta.NodeID]*node, queue string, msgs []broker.Message) {
	t.Helper()
	eventually(t, "every message is enqueued", func() bool {
		for _, id := range []meta.NodeID{"n1", "n2", "n3"} {
			if len(msgs) == 0 || !nodes[id].b.Leads(queue) {
				continue
			}
			var rest []broker.Message
			for i, r := range enqueue(t, nodes[id].b, msgs) {
				if r.Code != broker.CodeOk {
					rest = append(rest, msgs[i])
				}
			}
			msgs = rest
		}
		return len(msgs) == 0
	})
}

// TestIdleReplicatedGroupSleepsAndWakes: an idle 3-replica group's three replicas sleep (the
// leader's Hibernate entry applied everywhere); a request wakes it, and what was enqueued before
// each sleep is delivered after it, in order, none lost.
func TestIdleReplicatedGroupSleepsAndWakes(t *testing.T) {
	nodes := startBrokersIdle(t, 300*time.Millisecond)
	if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	eventually(t, "q has a leader", func() bool { return leaderOf(nodes, "q") != "" })
	var want []string
	batch := func(prefix string) {
		var msgs []broker.Message
		for i := range 20 {
			p := fmt.Sprintf("%s-%d", prefix, i)
			msgs = append(msgs, broker.Message{Queue: "q", Payload: []byte(p)})
			want = append(want, p)
		}
		enqueueAll(t, nodes, "q", msgs)
	}
	batch("a")
	eventually(t, "the group's three replicas sleep", func() bool { return awakeReplicas(nodes) == 0 })
	batch("b") // wakes the group
	eventually(t, "the group's three replicas sleep again", func() bool { return awakeReplicas(nodes) == 0 })

	s := &sink{ch: make(chan service.Delivery, 100)}
	var lead meta.NodeID
	eventually(t, "a replica leads q and takes a subscription", func() bool {
		for _, id := range []meta.NodeID{"n1", "n2", "n3"} {
			if nodes[id].b.Leads("q") {
				if _, e := nodes[id].b.Subscribe(broker.SubscribeRequest{Queue: "q", ConsumerID: "c1", Credit: 100}, s); e == nil {
					lead = id
					return true
				}
			}
		}
		return false
	})
	timeout := time.After(time.Minute)
	for i, w := range want {
		select {
		case d := <-s.ch:
			if string(d.Payload) != w {
				t.Fatalf("delivery %d is %q, want %q", i, d.Payload, w)
			}
			done := make(chan []broker.Code, 1)
			nodes[lead].b.Ack([]broker.AckItem{{Queue: "q", ID: d.ID}}, func(cs []broker.Code, e *broker.Error) { done <- cs })
			if cs := <-done; len(cs) != 1 || cs[0] != broker.CodeOk {
				t.Fatalf("ack answered %v", cs)
			}
		case <-timeout:
			t.Fatalf("delivered %d of %d messages", i, len(want))
		}
	}
}

// restart starts a stopped node again on its data directory, its link at the address it had.
func (n *node) restart(t *testing.T, id meta.NodeID) {
	t.Helper()
	members := n.opts.Cluster.Members
	var addr string
	for _, m := range members {
		if m.ID == id {
			addr = m.Address
		}
	}
	l, err := nodelink.New(nodelink.Config{Cluster: "test", NodeID: id, Listen: addr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		l.AddPeer(m.ID, m.Address)
	}
	o := n.opts
	o.Cluster.Network = l
	b, err := broker.Open(o)
	if err != nil {
		_ = l.Close()
		t.Fatal(err)
	}
	l.SetHandler(b)
	n.link, n.b = l, b
}

// TestAReplicaThatMissedTheSleepWakesTheOthers: a follower is down while its group's two other
// replicas fall asleep; started again, it never applied the Hibernate entry, so it stands for
// election, which wakes the others, and the group serves everything enqueued before and after.
func TestAReplicaThatMissedTheSleepWakesTheOthers(t *testing.T) {
	nodes := startBrokersIdle(t, 300*time.Millisecond)
	if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	eventually(t, "q has a leader", func() bool { return leaderOf(nodes, "q") != "" })
	var want []string
	batch := func(prefix string) {
		var msgs []broker.Message
		for i := range 10 {
			p := fmt.Sprintf("%s-%d", prefix, i)
			msgs = append(msgs, broker.Message{Queue: "q", Payload: []byte(p)})
			want = append(want, p)
		}
		enqueueAll(t, nodes, "q", msgs)
	}
	batch("a")
	var down meta.NodeID
	for _, id := range []meta.NodeID{"n1", "n2", "n3"} {
		if !nodes[id].b.Leads("q") {
			down = id
		}
	}
	nodes[down].stop()
	eventually(t, "the two other replicas sleep", func() bool { return awakeReplicas(nodes) == 0 })
	nodes[down].restart(t, down)
	// The restarted replica opens the group (it has no summary of the last entry) and can only
	// fall asleep again by a Hibernate entry committed after its election woke another replica.
	eventually(t, "the restarted replica's group is awake", func() bool { return nodes[down].b.AwakeQueues() == 1 })
	eventually(t, "the three replicas sleep again", func() bool { return awakeReplicas(nodes) == 0 })
	batch("b")

	s := &sink{ch: make(chan service.Delivery, 100)}
	eventually(t, "a replica leads q and takes a subscription", func() bool {
		for _, id := range []meta.NodeID{"n1", "n2", "n3"} {
			if nodes[id].b.Leads("q") {
				if _, e := nodes[id].b.Subscribe(broker.SubscribeRequest{Queue: "q", ConsumerID: "c1", Credit: 100}, s); e == nil {
					return true
				}
			}
		}
		return false
	})
	timeout := time.After(time.Minute)
	for i, w := range want {
		select {
		case d := <-s.ch:
			if string(d.Payload) != w {
				t.Fatalf("delivery %d is %q, want %q", i, d.Payload, w)
			}
		case <-timeout:
			t.Fatalf("delivered %d of %d messages", i, len(want))
		}
	}
}
