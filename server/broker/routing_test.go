package broker

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// Three in-process nodes: a node that does not lead a queue names the one that does, by the
// FIBP address it recorded (SetAdvertise), in every answer a client can act on; while it knows
// no leader, it says so (NodeNotReady).

type idleSink struct{}

func (idleSink) Subscribed(string)                       {}
func (idleSink) Deliver([]service.Delivery, func()) bool { return true }
func (idleSink) Ended(*Error)                            {}

func advertised(id meta.NodeID) string { return "fibp-" + string(id) + ":5555" }

// enqueueOne enqueues one message to queue on b and returns its result.
func enqueueOne(t *testing.T, b *Broker, queue string) EnqueueResult {
	t.Helper()
	ch := make(chan []EnqueueResult, 1)
	b.Enqueue([]Message{{Queue: queue, Payload: []byte("x")}}, func(rs []EnqueueResult, e *Error) {
		if e != nil {
			t.Errorf("enqueue on %s: %v", b.nodeID(), e)
		}
		ch <- rs
	})
	rs := <-ch
	if len(rs) != 1 {
		t.Fatalf("enqueue on %s: %d results", b.nodeID(), len(rs))
	}
	return rs[0]
}

// replicaKnows is the leader b's replica of queue knows ("none" when b has no replica open).
func replicaKnows(b *Broker, queue string) meta.NodeID {
	a := b.lookup(queue).a
	if a == nil {
		return "none"
	}
	ch := make(chan meta.NodeID, 1)
	a.post(func(a *actor) {
		if a.g == nil {
			ch <- "none"
			return
		}
		ch <- meta.NodeID(a.g.LeaderID())
	})
	return <-ch
}

// ackOne acks an unknown message of queue on b and returns its code.
func ackOne(b *Broker, queue string) Code {
	ch := make(chan Code, 1)
	b.Ack([]AckItem{{Queue: queue}}, func(codes []Code, e *Error) {
		if e != nil {
			ch <- e.Code
			return
		}
		ch <- codes[0]
	})
	return <-ch
}

func TestAFollowerNamesTheLeader(t *testing.T) {
	c := startCluster(t)
	for _, id := range c.ids {
		c.brokers[id].SetAdvertise(advertised(id))
	}
	c.eventually("every node's meta state holds every advertised address", func() bool {
		for _, b := range c.brokers {
			for _, n := range b.catalog().Nodes() {
				if n.Advertise != advertised(n.ID) {
					return false
				}
			}
		}
		return true
	})
	if e := c.createQueue(QueueSpec{Name: "routed"}); e != nil {
		t.Fatal(e)
	}
	leader := c.awaitLeader("routed")
	if r := enqueueOne(t, leader, "routed"); r.Code != CodeOk || r.Leader != nil {
		t.Fatalf("enqueue on the leader: %+v", r)
	}
	want := advertised(leader.nodeID())
	c.eventually("every replica follows the leader", func() bool {
		for _, b := range c.brokers {
			if id := replicaKnows(b, "routed"); id != leader.nodeID() {
				return false
			}
		}
		return true
	})
	for _, id := range c.ids {
		b := c.brokers[id]
		if b == leader {
			continue
		}
		c.eventually("node "+string(id)+" answers a Consume NotLeader with "+want, func() bool {
			sub, e := b.Subscribe(SubscribeRequest{Queue: "routed", ConsumerID: "c-" + string(id)}, idleSink{})
			if sub != nil {
				sub.Unsubscribe()
			}
			return e != nil && e.Code == CodeNotLeader && e.LeaderAddr == want
		})
		if r := enqueueOne(t, b, "routed"); r.Code != CodeNotLeader || r.Leader == nil || r.Leader.LeaderAddr != want || r.Leader.Queue != "routed" {
			t.Errorf("enqueue on follower %s: %+v (leader %+v), want NotLeader naming %s", id, r, r.Leader, want)
		}
		if code := ackOne(b, "routed"); code != CodeNotLeader {
			t.Errorf("ack on follower %s: %v, want NotLeader", id, code)
		}
		routes, ok, e := b.QueueRoutes(nil)
		if !ok || e != nil || len(routes) != 2 {
			t.Fatalf("routes from %s: %+v %v %v", id, routes, ok, e)
		}
		for _, r := range routes { // the queue and its dead-letter queue: one group
			if r.LeaderAddr != want {
				t.Errorf("route from %s: %+v, want %s", id, r, want)
			}
		}
		if _, _, e := b.QueueRoutes([]string{"nope"}); e == nil || e.Code != CodeQueueNotFound {
			t.Errorf("route of a queue that does not exist: %v", e)
		}
	}
	for _, id := range c.ids {
		nodes, _, ok := c.brokers[id].ClusterNodes()
		if !ok || len(nodes) != 3 {
			t.Fatalf("status from %s: %+v", id, nodes)
		}
		total := uint32(0)
		for _, n := range nodes {
			if n.State != service.NodeUp || n.Addr == "" {
				t.Errorf("status from %s: %+v", id, n)
			}
			total += n.QueueLeaderships
			if n.Addr == want && n.QueueLeaderships != 1 {
				t.Errorf("status from %s: the leader %+v leads %d groups, want 1", id, n, n.QueueLeaderships)
			}
		}
		if total != 1 {
			t.Errorf("status from %s: %d leaderships, want 1", id, total)
		}
	}

	// A follower cut off from the others stops knowing a leader: NodeNotReady, not a stale address.
	var follower meta.NodeID
	for _, id := range c.ids {
		if c.brokers[id] != leader {
			follower = id
		}
	}
	c.net.isolate(follower)
	b := c.brokers[follower]
	c.eventually("the cut-off follower answers NodeNotReady", func() bool {
		return enqueueOne(t, b, "routed").Code == CodeNodeNotReady && ackOne(b, "routed") == CodeNodeNotReady
	})
	if _, e := b.Subscribe(SubscribeRequest{Queue: "routed", ConsumerID: "cut"}, idleSink{}); e == nil || e.Code != CodeNodeNotReady {
		t.Errorf("consume on the cut-off follower: %v, want NodeNotReady", e)
	}
}

// A single node is no cluster: its answers stay what they were.
func TestASingleNodeHasNoRoutes(t *testing.T) {
	o := DefaultOptions(t.TempDir())
	o.Sync = false
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.SetAdvertise("127.0.0.1:5555")
	if _, ok, _ := b.QueueRoutes(nil); ok {
		t.Error("a single node answered routes")
	}
	if _, _, ok := b.ClusterNodes(); ok {
		t.Error("a single node answered cluster nodes")
	}
	if r := enqueueOne(t, b, "nope"); r.Code != CodeQueueNotFound {
		t.Errorf("enqueue to a queue that does not exist: %v", r.Code)
	}
}

// endSink records how its subscription ended.
type endSink struct{ ended chan *Error }

func (endSink) Subscribed(string)                       {}
func (endSink) Deliver([]service.Delivery, func()) bool { return true }
func (s endSink) Ended(e *Error)                        { s.ended <- e }

// A subscription on a leader that hands its leadership over ends NotLeader, naming the successor
// when the old leader already heard from it, and never another node.
func TestADeposedLeadersSubscriptionsEndNamingTheSuccessor(t *testing.T) {
	c := startCluster(t)
	for _, id := range c.ids {
		c.brokers[id].SetAdvertise(advertised(id))
	}
	if e := c.createQueue(QueueSpec{Name: "moving"}); e != nil {
		t.Fatal(e)
	}
	named := 0
	for round := range 3 {
		leader := c.awaitLeader("moving")
		c.eventually("the leader's advertised address is recorded everywhere", func() bool {
			for _, b := range c.brokers {
				if n, ok := b.catalog().Node(leader.nodeID()); !ok || n.Advertise == "" {
					return false
				}
			}
			return true
		})
		sink := endSink{ended: make(chan *Error, 1)}
		if _, e := leader.Subscribe(SubscribeRequest{Queue: "moving", ConsumerID: fmt.Sprint("c", round)}, sink); e != nil {
			t.Fatal(e)
		}
		var to meta.NodeID
		for _, id := range c.ids {
			if id != leader.nodeID() {
				to = id
				break
			}
		}
		if err := leader.TransferLeadership("moving", raft.ServerID(to), c.net.Address(to, "moving")); err != nil {
			t.Fatal(err)
		}
		e := <-sink.ended
		if e == nil || e.Code != CodeNotLeader || (e.LeaderAddr != "" && e.LeaderAddr != advertised(to)) {
			t.Fatalf("the subscription on the deposed leader ended %+v, want NotLeader naming %s or none", e, advertised(to))
		}
		if e.LeaderAddr != "" {
			named++
		}
	}
	t.Logf("%d of 3 ended subscriptions named the successor", named)
}

// TestMeasureRoutes (FILA_MEASURE_ROUTES=N only): how long GetRoutes and GetClusterStatus take
// on a node of three in-process nodes holding N queue groups (every one replicated on each).
func TestMeasureRoutes(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_ROUTES"))
	if n == 0 {
		t.Skip("FILA_MEASURE_ROUTES=N measures")
	}
	c := startCluster(t)
	for _, id := range c.ids {
		c.brokers[id].SetAdvertise(advertised(id))
	}
	for i := range n {
		c.eventually("the queue is created", func() bool { // a meta leader deposed under load: again
			e := c.createQueue(QueueSpec{Name: fmt.Sprint("q", i)})
			return e == nil || e.Code == CodeQueueAlreadyExists
		})
	}
	for _, id := range c.ids {
		b := c.brokers[id]
		c.eventually("every group has a leader known here", func() bool {
			routes, _, _ := b.QueueRoutes(nil)
			for _, r := range routes {
				if r.LeaderAddr == "" {
					return false
				}
			}
			return len(routes) == 2*n
		})
		start := time.Now()
		const rounds = 10
		for range rounds {
			b.QueueRoutes(nil)
		}
		routes := time.Since(start) / rounds
		start = time.Now()
		for range rounds {
			b.ClusterNodes()
		}
		t.Logf("node %s, %d groups: GetRoutes (every queue) %v, GetClusterStatus %v", id, n, routes, time.Since(start)/rounds)
	}
}
