package nodelink_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/nodelink"
	"github.com/filamq/fila/server/service"
)

// Three brokers, each with its own link over loopback TCP (broker.Options.Cluster.Network): the
// shape of server/broker's in-process cluster tests, over the network.

var _ broker.Network = (*nodelink.Link)(nil)

type node struct {
	link *nodelink.Link
	b    *broker.Broker
	opts broker.Options // what b was opened with (restart)
}

func startBrokers(t *testing.T) map[meta.NodeID]*node {
	t.Helper()
	return startBrokersIdle(t, -1)
}

// startBrokersIdle starts the three brokers with idle as their queues' IdleTimeout (negative:
// they never hibernate).
func startBrokersIdle(t *testing.T, idle time.Duration) map[meta.NodeID]*node {
	t.Helper()
	return startBrokersWith(t, []meta.NodeID{"n1", "n2", "n3"}, func(o *broker.Options) {
		o.Sync = false
		o.IdleTimeout = idle
		o.Cluster.HeartbeatTimeout = 150 * time.Millisecond
	}, "")
}

// startBrokersWith starts a broker for each of ids, each over its own link to the others, with
// DefaultOptions on a temporary directory that configure changes (Cluster's node, network and
// members are filled in first), and waits until every node's meta state lists them all, and
// until ready holds for each when given.
func startBrokersWith(t *testing.T, ids []meta.NodeID, configure func(*broker.Options), what string,
	ready ...func(*node) bool) map[meta.NodeID]*node {
	t.Helper()
	nodes := map[meta.NodeID]*node{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var members []meta.Node
	for _, id := range ids {
		l, err := nodelink.New(nodelink.Config{Cluster: "test", NodeID: id, Listen: "127.0.0.1:0", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = &node{link: l}
		members = append(members, meta.Node{ID: id, Address: l.Addr()})
	}
	for _, a := range ids {
		for _, m := range members {
			nodes[a].link.AddPeer(m.ID, m.Address)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for _, id := range ids {
		n := nodes[id]
		wg.Go(func() {
			o := broker.DefaultOptions(t.TempDir())
			o.Cluster = broker.Cluster{NodeID: string(id), Network: n.link, Members: members}
			configure(&o)
			b, err := broker.Open(o)
			if err != nil {
				errs <- fmt.Errorf("node %s: %w", id, err)
				return
			}
			n.b, n.opts = b, o
			n.link.SetHandler(b)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	if what == "" {
		what = "every node's meta state lists every member"
	}
	eventually(t, what, func() bool {
		for _, n := range nodes {
			if len(n.b.Nodes()) != len(ids) {
				return false
			}
			for _, r := range ready {
				if !r(n) {
					return false
				}
			}
		}
		return true
	})
	return nodes
}

// stop stops the node's broker and link (as a node that goes down).
func (n *node) stop() {
	if n.b != nil {
		_ = n.b.Close()
		n.b = nil
	}
	_ = n.link.Close()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after a minute: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaderOf is the node that leads queue now ("" while none does).
func leaderOf(nodes map[meta.NodeID]*node, queue string) meta.NodeID {
	for id, n := range nodes {
		if n.b != nil && n.b.Leads(queue) {
			return id
		}
	}
	return ""
}

// sink collects a subscription's deliveries.
type sink struct{ ch chan service.Delivery }

func (s *sink) Subscribed(string) {}
func (s *sink) Deliver(ds []service.Delivery, onWritten func()) bool {
	for _, d := range ds {
		d.Payload = append([]byte(nil), d.Payload...)
		select {
		case s.ch <- d:
		default:
			return false
		}
	}
	if onWritten != nil {
		onWritten()
	}
	return true
}
func (s *sink) Ended(*broker.Error) {}

func enqueue(t *testing.T, b *broker.Broker, msgs []broker.Message) []broker.EnqueueResult {
	t.Helper()
	type answer struct {
		rs []broker.EnqueueResult
		e  *broker.Error
	}
	ch := make(chan answer, 1)
	b.Enqueue(msgs, func(rs []broker.EnqueueResult, e *broker.Error) {
		ch <- answer{append([]broker.EnqueueResult(nil), rs...), e}
	})
	a := <-ch
	if a.e != nil {
		t.Fatalf("enqueue: %v", a.e)
	}
	return a.rs
}

// A queue created on any node, leader of the meta group or not, is replicated on the three nodes
// over the links; when its leader's node goes down, another replica takes over and delivers
// every message enqueued before, body included.
func TestBrokersOverTheLink(t *testing.T) {
	nodes := startBrokers(t)
	for i, id := range []meta.NodeID{"n1", "n2", "n3"} {
		name := fmt.Sprint("q", i)
		if e := nodes[id].b.CreateQueue(broker.QueueSpec{Name: name}); e != nil {
			t.Fatalf("creating %s on %s: %v", name, id, e)
		}
		if e := nodes[id].b.CreateQueue(broker.QueueSpec{Name: name}); e == nil || e.Code != broker.CodeQueueAlreadyExists {
			t.Fatalf("creating %s again on %s answered %v", name, id, e)
		}
	}
	for i := range 3 {
		name := fmt.Sprint("q", i)
		eventually(t, name+" has a leader", func() bool { return leaderOf(nodes, name) != "" })
	}

	var msgs []broker.Message
	for i := range 50 {
		msgs = append(msgs, broker.Message{Queue: "q0", Payload: fmt.Appendf(nil, "body-%d", i)})
	}
	// Each message is sent to q0's leader until it answers Ok (one that answers NotLeader
	// stored nothing).
	eventually(t, "every message is enqueued", func() bool {
		lead := leaderOf(nodes, "q0")
		if lead == "" {
			return false
		}
		var rest []broker.Message
		for i, r := range enqueue(t, nodes[lead].b, msgs) {
			if r.Code != broker.CodeOk {
				rest = append(rest, msgs[i])
			}
		}
		msgs = rest
		return len(msgs) == 0
	})
	var lead meta.NodeID
	eventually(t, "q0 has a leader", func() bool { lead = leaderOf(nodes, "q0"); return lead != "" })
	nodes[lead].stop()
	var next meta.NodeID
	s := &sink{ch: make(chan service.Delivery, 100)}
	eventually(t, "another replica leads q0 and takes a subscription", func() bool {
		next = leaderOf(nodes, "q0")
		if next == "" || next == lead {
			return false
		}
		_, e := nodes[next].b.Subscribe(broker.SubscribeRequest{Queue: "q0", ConsumerID: "c1", Credit: 100}, s)
		return e == nil
	})
	seen := map[string]bool{}
	timeout := time.After(time.Minute)
	for len(seen) < 50 {
		select {
		case d := <-s.ch:
			seen[string(d.Payload)] = true
			done := make(chan []broker.Code, 1)
			nodes[next].b.Ack([]broker.AckItem{{Queue: "q0", ID: d.ID}}, func(cs []broker.Code, e *broker.Error) {
				if e != nil {
					t.Errorf("ack: %v", e)
				}
				done <- cs
			})
			if cs := <-done; len(cs) != 1 || cs[0] != broker.CodeOk {
				t.Fatalf("ack answered %v", cs)
			}
		case <-timeout:
			t.Fatalf("the new leader delivered %d of 50 messages", len(seen))
		}
	}
	for i := range 50 {
		if !seen[fmt.Sprintf("body-%d", i)] {
			t.Fatalf("body-%d was not delivered", i)
		}
	}
}

// A queue's leader cut off from the other nodes (the link's Partition) is replaced; what it
// answered Ok while cut off is not lost; healed, it catches up, takes the leadership back and
// delivers every acknowledged message.
func TestBrokersPartitionedLeaderIsReplaced(t *testing.T) {
	nodes := startBrokers(t)
	if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	eventually(t, "q has a leader", func() bool { return leaderOf(nodes, "q") != "" })
	want := map[string]bool{}
	// send enqueues through the leader among the nodes given until every message is answered
	// Ok; cut-off sends once to a node that may no longer lead.
	send := func(among []meta.NodeID, prefix string, n int, cutOff bool) {
		var msgs []broker.Message
		for i := range n {
			msgs = append(msgs, broker.Message{Queue: "q", Payload: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		eventually(t, prefix+" messages are enqueued", func() bool {
			on := among[0]
			if !cutOff {
				on = ""
				for _, id := range among {
					if nodes[id].b.Leads("q") {
						on = id
					}
				}
				if on == "" {
					return false
				}
			}
			var rest []broker.Message
			for i, r := range enqueue(t, nodes[on].b, msgs) {
				if r.Code == broker.CodeOk {
					want[string(msgs[i].Payload)] = true
				} else {
					rest = append(rest, msgs[i])
				}
			}
			msgs = rest
			return cutOff || len(msgs) == 0
		})
	}
	all := []meta.NodeID{"n1", "n2", "n3"}
	send(all, "before", 20, false)
	var old meta.NodeID
	eventually(t, "q has a leader", func() bool { old = leaderOf(nodes, "q"); return old != "" })
	var others []meta.NodeID
	for id := range nodes {
		if id != old {
			others = append(others, id)
			nodes[old].link.Partition(id)
		}
	}
	send([]meta.NodeID{old}, "cut-off", 5, true) // answered NotLeader (or Ok, if it committed before the cut)
	send(others, "during", 20, false)
	for _, id := range others {
		nodes[old].link.Heal(id)
	}
	eventually(t, "the old leader follows", func() bool { return !nodes[old].b.Leads("q") })
	s := &sink{ch: make(chan service.Delivery, 100)}
	eventually(t, "the old leader takes the leadership back and a subscription", func() bool {
		if !nodes[old].b.Leads("q") {
			if l := leaderOf(nodes, "q"); l != "" {
				_ = nodes[l].b.TransferLeadership("q", raft.ServerID(old), nodes[old].link.Address(old, "q"))
			}
			return false
		}
		_, e := nodes[old].b.Subscribe(broker.SubscribeRequest{Queue: "q", ConsumerID: "c1", Credit: 100}, s)
		return e == nil
	})
	got := map[string]bool{}
	timeout := time.After(time.Minute)
	for len(got) < len(want) {
		select {
		case d := <-s.ch:
			if !want[string(d.Payload)] {
				t.Fatalf("delivered %q, which no enqueue was answered Ok for", d.Payload)
			}
			got[string(d.Payload)] = true
		case <-timeout:
			t.Fatalf("delivered %d of %d messages", len(got), len(want))
		}
	}
}
