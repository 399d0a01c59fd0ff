package broker

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/service"
)

// Three brokers in one process, their Raft groups connected by hashicorp/raft's in-memory
// transports (the seam the inter-node link will fill): the cluster's shape without its network.

// memNetwork connects the groups of in-process nodes: each node's member of a group has its own
// in-memory transport, connected both ways to every other node's member of the group.
type memNetwork struct {
	mu      sync.Mutex
	brokers map[meta.NodeID]*Broker                         // the nodes, for the meta entries handed to their leader
	trans   map[string]map[meta.NodeID]*raft.InmemTransport // by group, by node
	cut     map[meta.NodeID]bool                            // nodes cut off from the others
}

func newMemNetwork() *memNetwork {
	return &memNetwork{trans: map[string]map[meta.NodeID]*raft.InmemTransport{}, cut: map[meta.NodeID]bool{},
		brokers: map[meta.NodeID]*Broker{}}
}

func (n *memNetwork) Address(node meta.NodeID, group string) raft.ServerAddress {
	return raft.ServerAddress(string(node) + "/" + group)
}

// node is one node's view of the network.
type memNode struct {
	n    *memNetwork
	self meta.NodeID
}

func (m memNode) Address(node meta.NodeID, group string) raft.ServerAddress {
	return m.n.Address(node, group)
}

func (m memNode) ProposeMeta(node meta.NodeID, entry []byte) (uint64, error) {
	m.n.mu.Lock()
	b, cut := m.n.brokers[node], m.n.cut[node] || m.n.cut[m.self]
	m.n.mu.Unlock()
	if b == nil || cut {
		return 0, fmt.Errorf("node %s is unreachable", node)
	}
	return b.ProposeMeta(entry)
}

func (m memNode) Transport(group string) (raft.Transport, error) {
	n := m.n
	n.mu.Lock()
	defer n.mu.Unlock()
	members := n.trans[group]
	if members == nil {
		members = map[meta.NodeID]*raft.InmemTransport{}
		n.trans[group] = members
	}
	_, t := raft.NewInmemTransport(n.Address(m.self, group))
	for id, other := range members {
		if id == m.self || n.cut[id] || n.cut[m.self] {
			continue
		}
		t.Connect(other.LocalAddr(), other)
		other.Connect(t.LocalAddr(), t)
	}
	members[m.self] = t // a reopened group replaces its transport
	return t, nil
}

// isolate cuts node off from every other node in every group (reconnect undoes it).
func (n *memNetwork) isolate(node meta.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[node] = true
	for _, members := range n.trans {
		t := members[node]
		if t == nil {
			continue
		}
		t.DisconnectAll()
		for id, other := range members {
			if id != node {
				other.Disconnect(t.LocalAddr())
			}
		}
	}
}

func (n *memNetwork) reconnect(node meta.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, node)
	for _, members := range n.trans {
		t := members[node]
		if t == nil {
			continue
		}
		for id, other := range members {
			if id != node && !n.cut[id] {
				t.Connect(other.LocalAddr(), other)
				other.Connect(t.LocalAddr(), t)
			}
		}
	}
}

type memCluster struct {
	t       *testing.T
	net     *memNetwork
	ids     []meta.NodeID
	brokers map[meta.NodeID]*Broker
}

// startCluster opens three brokers as one cluster and waits until the meta state lists them.
func startCluster(t *testing.T) *memCluster {
	t.Helper()
	return startClusterWith(t, 150*time.Millisecond, func(c *memCluster, id meta.NodeID) Network {
		return memNode{n: c.net, self: id}
	})
}

// startClusterWith is startCluster with heartbeat timeout hb and each node's Network from network.
func startClusterWith(t *testing.T, hb time.Duration, network func(c *memCluster, id meta.NodeID) Network) *memCluster {
	t.Helper()
	c := &memCluster{t: t, net: newMemNetwork(), ids: []meta.NodeID{"n1", "n2", "n3"}, brokers: map[meta.NodeID]*Broker{}}
	var members []meta.Node
	for _, id := range c.ids {
		members = append(members, meta.Node{ID: id, Address: string(id)})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(c.ids))
	for _, id := range c.ids {
		wg.Go(func() {
			o := DefaultOptions(t.TempDir())
			o.Sync = false
			o.IdleTimeout = -1
			o.Cluster = Cluster{NodeID: string(id), Network: network(c, id), Members: members, HeartbeatTimeout: hb}
			b, err := Open(o)
			if err != nil {
				errs <- fmt.Errorf("node %s: %w", id, err)
				return
			}
			mu.Lock()
			c.brokers[id] = b
			mu.Unlock()
			c.net.mu.Lock()
			c.net.brokers[id] = b
			c.net.mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, b := range c.brokers {
			_ = b.Close()
		}
	})
	c.eventually("every node's meta state lists the three members", func() bool {
		for _, b := range c.brokers {
			if len(b.catalog().Nodes()) != 3 {
				return false
			}
		}
		return true
	})
	return c
}

// eventually waits until cond holds, polling; the test fails after a minute.
func (c *memCluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("still not true after a minute: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metaLeader is the node that leads the meta group (nil while none does).
func (c *memCluster) metaLeader() *Broker {
	for _, id := range c.ids {
		b := c.brokers[id]
		if g := b.metaGroupNow(); g != nil && g.Leader() {
			return b
		}
	}
	return nil
}

// leader is the node that leads queue's group now (nil while none does).
func (c *memCluster) leader(queue string) *Broker {
	for _, id := range c.ids {
		if b := c.brokers[id]; b.Leads(queue) {
			return b
		}
	}
	return nil
}

func (c *memCluster) awaitLeader(queue string) *Broker {
	c.t.Helper()
	var b *Broker
	c.eventually("queue "+queue+" has a leader", func() bool { b = c.leader(queue); return b != nil })
	return b
}

// awaitReplicas waits until every node hosts a replica of queue's group.
func (c *memCluster) awaitReplicas(queue string) {
	c.t.Helper()
	c.eventually("every node hosts a replica of "+queue, func() bool {
		for _, b := range c.brokers {
			if b.lookup(queue).a == nil {
				return false
			}
		}
		return true
	})
}

func (c *memCluster) createQueue(spec QueueSpec) *Error {
	c.t.Helper()
	var b *Broker
	c.eventually("the meta group has a leader", func() bool { b = c.metaLeader(); return b != nil })
	return b.CreateQueue(spec)
}

// history is what a producer and a consumer saw, for the checker.
type history struct {
	mu        sync.Mutex
	attempted map[string]bool      // every payload sent, whatever the answer
	acked     map[MessageID]string // enqueues answered Ok: ID → payload
	delivered map[MessageID]string // every delivery: ID → payload
	settled   map[MessageID]int    // acks answered Ok
}

func newHistory() *history {
	return &history{attempted: map[string]bool{}, acked: map[MessageID]string{}, delivered: map[MessageID]string{},
		settled: map[MessageID]int{}}
}

// check says what the history breaks: an acknowledged enqueue never delivered (or delivered
// with another body), a delivery of something never sent, a message acked twice.
func (h *history) check() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var bad []string
	for id, p := range h.acked {
		if got, ok := h.delivered[id]; !ok {
			bad = append(bad, fmt.Sprintf("%v (%q) was acknowledged and never delivered", id, p))
		} else if got != p {
			bad = append(bad, fmt.Sprintf("%v was sent as %q and delivered as %q", id, p, got))
		}
	}
	for id, p := range h.delivered {
		if !h.attempted[p] {
			bad = append(bad, fmt.Sprintf("%v (%q) was delivered and never sent", id, p))
		}
	}
	for id, n := range h.settled {
		if n > 1 {
			bad = append(bad, fmt.Sprintf("%v was acked %d times", id, n))
		}
	}
	return bad
}

// consumer follows a queue's leader: it subscribes there, acks what it gets, and subscribes
// again on the next leader when its subscription ends.
type consumer struct {
	c     *memCluster
	queue string
	h     *history
	n     atomic.Int64 // subscriptions made
	stop  chan struct{}
	done  chan struct{}
}

type consumerSink struct {
	k     *consumer
	b     *Broker
	ended chan struct{}
	once  sync.Once
}

func (s *consumerSink) Subscribed(string) {}

func (s *consumerSink) Deliver(ds []service.Delivery, onWritten func()) bool {
	items := make([]AckItem, len(ds))
	s.k.h.mu.Lock()
	for i, d := range ds {
		s.k.h.delivered[d.ID] = string(d.Payload)
		items[i] = AckItem{Queue: d.Queue, ID: d.ID}
	}
	s.k.h.mu.Unlock()
	go func() {
		s.b.Ack(items, func(codes []Code, e *Error) {
			if e != nil {
				return
			}
			s.k.h.mu.Lock()
			for i, code := range codes {
				if code == CodeOk {
					s.k.h.settled[items[i].ID]++
				}
			}
			s.k.h.mu.Unlock()
		})
		if onWritten != nil {
			onWritten()
		}
	}()
	return true
}

func (s *consumerSink) Ended(*Error) { s.once.Do(func() { close(s.ended) }) }

func (k *consumer) run() {
	defer close(k.done)
	for {
		select {
		case <-k.stop:
			return
		default:
		}
		b := k.c.leader(k.queue)
		if b == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		sink := &consumerSink{k: k, b: b, ended: make(chan struct{})}
		sub, e := b.Subscribe(SubscribeRequest{Queue: k.queue, ConsumerID: fmt.Sprint("c", k.n.Add(1))}, sink)
		if e != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		select {
		case <-sink.ended:
		case <-k.stop:
			sub.Unsubscribe()
			return
		}
	}
}

// produce enqueues count messages through whichever node leads the queue, one request each.
func (c *memCluster) produce(queue, prefix string, count int, h *history) {
	for i := 0; i < count; {
		b := c.leader(queue)
		if b == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		p := fmt.Sprintf("%s-%d", prefix, i)
		h.mu.Lock()
		h.attempted[p] = true
		h.mu.Unlock()
		done := make(chan []EnqueueResult, 1)
		b.Enqueue([]Message{{Queue: queue, Payload: []byte(p)}}, func(res []EnqueueResult, e *Error) {
			if e != nil {
				res = nil
			}
			done <- res
		})
		res := <-done
		if len(res) == 1 && res[0].Code == CodeOk {
			h.mu.Lock()
			h.acked[res[0].ID] = p
			h.mu.Unlock()
			i++
		}
	}
}

// A queue created on the meta leader is hosted by the three nodes through apply alone; its
// leadership moves back and forth while a producer and a consumer follow it, and afterwards every
// acknowledged enqueue was delivered with its body, nothing was acked twice, and no replica went
// through a reload (a deposed leader demotes in place).
func TestLeadershipMovesUnderLoadWithoutLoss(t *testing.T) {
	c := startCluster(t)
	// Messages leased to a subscription that ended with its leader come back after their lease:
	// keep it short.
	if e := c.createQueue(QueueSpec{Name: "q", VisibilityTimeoutMs: 1000}); e != nil {
		t.Fatal(e)
	}
	c.eventually("every node hosts a replica of q", func() bool {
		for _, b := range c.brokers {
			if b.lookup("q").a == nil || b.lookup("q.dlq").a == nil {
				return false
			}
		}
		return true
	})
	c.awaitLeader("q")

	h := newHistory()
	k := &consumer{c: c, queue: "q", h: h, stop: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	produced := make(chan struct{})
	go func() { defer close(produced); c.produce("q", "m", 600, h) }()

	leaders := map[*Broker]bool{}
	for moves := 0; moves < 12; {
		select {
		case <-produced:
			moves = 12 // the load is over before the moves: enough of them happened under it
			continue
		default:
		}
		b := c.awaitLeader("q")
		leaders[b] = true
		if err := b.TransferLeadership("q", "", ""); err != nil {
			time.Sleep(20 * time.Millisecond) // a transfer already under way, or no follower caught up yet
			continue
		}
		moves++
	}
	<-produced
	c.eventually("every acknowledged enqueue is delivered and acked", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for id := range h.acked {
			if h.settled[id] == 0 {
				return false
			}
		}
		return true
	})
	close(k.stop)
	<-k.done
	if bad := h.check(); len(bad) > 0 {
		t.Fatalf("%d violations:\n%s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n"))
	}
	if len(leaders) < 2 {
		t.Fatalf("the leadership never moved (%d leaders seen)", len(leaders))
	}
	for id, b := range c.brokers {
		a := b.lookup("q").a
		if n := a.reloads.Load(); n != 0 {
			t.Fatalf("node %s reloaded q %d times: a change of role must not reopen the group", id, n)
		}
	}
	t.Logf("%d messages acknowledged, %d subscriptions, %d leaders seen", len(h.acked), k.n.Load(), len(leaders))
}

// Two CreateQueue of one name racing on the meta leader: exactly one succeeds, and every node
// holds the one definition.
func TestRacingCreatesOfOneNameHaveOneWinner(t *testing.T) {
	c := startCluster(t)
	var wg sync.WaitGroup
	results := make([]*Error, 2)
	for i := range results {
		wg.Go(func() {
			results[i] = c.createQueue(QueueSpec{Name: "race", VisibilityTimeoutMs: uint64(1000 * (i + 1))})
		})
	}
	wg.Wait()
	won := 0
	for _, e := range results {
		switch {
		case e == nil:
			won++
		case e.Code != CodeQueueAlreadyExists:
			t.Fatalf("a losing create answered %v", e)
		}
	}
	if won != 1 {
		t.Fatalf("%d creates won", won)
	}
	var vt uint64
	c.eventually("every node holds the winner's definition", func() bool {
		seen := map[uint64]bool{}
		for _, b := range c.brokers {
			d, ok := b.catalog().Queue("race")
			if !ok {
				return false
			}
			seen[d.VisibilityTimeoutMs] = true
			vt = d.VisibilityTimeoutMs
		}
		return len(seen) == 1
	})
	if want := map[bool]uint64{true: 1000, false: 2000}[results[0] == nil]; vt != want {
		t.Fatalf("the nodes hold visibility timeout %d, the winner asked for %d", vt, want)
	}
}

// A replica cut off while its group goes on (and snapshots, truncating the log behind it) is
// brought up by InstallSnapshot when it is back, and then, leading, delivers every message with
// its body.
func TestAReplicaBehindCatchesUpBySnapshotAndServesEveryBody(t *testing.T) {
	c := startCluster(t)
	if e := c.createQueue(QueueSpec{Name: "lag"}); e != nil {
		t.Fatal(e)
	}
	c.awaitReplicas("lag")
	leader := c.awaitLeader("lag")
	var behind meta.NodeID
	for id, b := range c.brokers {
		if b != leader {
			behind = id
			break
		}
	}
	c.net.isolate(behind)
	h := newHistory()
	c.produce("lag", "b", 300, h) // one entry each: well past the log the snapshot keeps (trailingLogs)
	var snapErr error
	if !leader.lookup("lag").a.call(func(a *actor) { snapErr = a.snapshot() }) {
		t.Fatal("the leader stopped leading")
	}
	if snapErr != nil {
		t.Fatal(snapErr)
	}
	c.eventually("the leader's snapshot is written and its log truncated", func() bool {
		var first uint64
		ok := leader.lookup("lag").a.call(func(a *actor) { first, _ = a.g.Stats() })
		return ok && first > 1
	})
	c.net.reconnect(behind)
	lagging := c.brokers[behind]
	c.eventually("the replica that was behind has every message", func() bool {
		var n int
		a := lagging.lookup("lag").a
		a.fsm.mu.Lock()
		if a.fsm.state != nil && !a.fsm.leading.Load() {
			n = a.fsm.state.Lane(0).Len()
		}
		a.fsm.mu.Unlock()
		return n == 300
	})
	c.eventually("the leadership moves to the replica that was behind", func() bool {
		if lagging.Leads("lag") {
			return true
		}
		if b := c.leader("lag"); b != nil {
			_ = b.TransferLeadership("lag", raft.ServerID(behind), c.net.Address(behind, "lag"))
		}
		return lagging.Leads("lag")
	})
	_, snaps, err := lagging.db.QueueLog("lag", queuegroup.Bodies{})
	if err != nil {
		t.Fatal(err)
	}
	if metas, err := snaps.List(); err != nil || len(metas) == 0 {
		t.Fatalf("the replica caught up without a snapshot (%v): the test did not truncate the log it needed", err)
	}
	k := &consumer{c: c, queue: "lag", h: h, stop: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	c.eventually("every message is delivered", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.delivered) >= len(h.acked)
	})
	close(k.stop)
	<-k.done
	if bad := h.check(); len(bad) > 0 {
		t.Fatalf("%d violations:\n%s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n"))
	}
}

// A follower snapshots by itself and truncates its log: nobody else would.
func TestFollowersSnapshotTheirOwnLog(t *testing.T) {
	entries, check := followerSnapshotEntries, followerSnapshotCheck
	followerSnapshotEntries, followerSnapshotCheck = 100, 20*time.Millisecond
	t.Cleanup(func() { followerSnapshotEntries, followerSnapshotCheck = entries, check })
	c := startCluster(t)
	if e := c.createQueue(QueueSpec{Name: "f"}); e != nil {
		t.Fatal(e)
	}
	leader := c.awaitLeader("f")
	c.produce("f", "x", 300, newHistory())
	for id, b := range c.brokers {
		if b == leader {
			continue
		}
		c.eventually(fmt.Sprintf("follower %s truncated its log behind a snapshot", id), func() bool {
			a := b.lookup("f").a
			if a == nil {
				return false // its replica is still opening
			}
			logs, _, err := b.db.QueueLog("f", queuegroup.Bodies{})
			if err != nil {
				return false
			}
			first, err := logs.FirstIndex()
			return err == nil && first > 1
		})
	}
}

// Queues created on any node — the meta leader or a follower, which hands the change to the
// leader — are hosted by the nodes placement assigns them, through apply alone, and each
// creator answers once it has applied the creation itself.
func TestQueuesCreatedOnAnyNodeAppearOnTheirReplicas(t *testing.T) {
	c := startCluster(t)
	for i, id := range c.ids {
		name := fmt.Sprint("any", i)
		if e := c.brokers[id].CreateQueue(QueueSpec{Name: name}); e != nil {
			t.Fatalf("creating %s on %s: %v", name, id, e)
		}
		if _, ok := c.brokers[id].catalog().Queue(name); !ok {
			t.Fatalf("%s answered the creation of %s before applying it", id, name)
		}
		if e := c.brokers[id].CreateQueue(QueueSpec{Name: name}); e == nil || e.Code != CodeQueueAlreadyExists {
			t.Fatalf("creating %s again on %s answered %v", name, id, e)
		}
	}
	c.eventually("every queue is hosted by its three replicas and led by one of them", func() bool {
		for i := range c.ids {
			name := fmt.Sprint("any", i)
			for _, b := range c.brokers {
				if b.lookup(name).a == nil {
					return false
				}
			}
			if c.leader(name) == nil {
				return false
			}
		}
		return true
	})
}

// A follower of the meta group snapshots by itself and truncates its meta log too.
func TestMetaFollowersSnapshotTheirOwnLog(t *testing.T) {
	entries, check := followerSnapshotEntries, followerSnapshotCheck
	followerSnapshotEntries, followerSnapshotCheck = 40, 20*time.Millisecond
	t.Cleanup(func() { followerSnapshotEntries, followerSnapshotCheck = entries, check })
	c := startCluster(t)
	for i := range 150 { // past raft's trailing logs (64), which a snapshot leaves in the log
		if e := c.createQueue(QueueSpec{Name: fmt.Sprint("m", i)}); e != nil {
			t.Fatal(e)
		}
	}
	leader := c.metaLeader()
	for id, b := range c.brokers {
		if b == leader {
			continue
		}
		c.eventually(fmt.Sprintf("meta follower %s truncated its meta log behind a snapshot", id), func() bool {
			first, _ := b.metaGroupNow().Stats()
			return first > 1
		})
	}
}
