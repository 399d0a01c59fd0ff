package fila_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// fakeNode is a scripted cluster node: status lists every fake node; on answers the rest.
type fakeNode struct {
	id   uint64
	peer *fibptest.Peer
	mu   sync.Mutex
	got  map[fibp.Opcode][]time.Time // requests received, by opcode
	on   func(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool
}

func (n *fakeNode) count(op fibp.Opcode) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.got[op])
}

// startFakeCluster starts one fake node per handler; every node answers GetClusterStatus with
// all of them. hello, when set, answers a node's Handshake instead of HandshakeOk (nil: the
// connection is closed), and the handshakes are counted.
func startFakeCluster(t *testing.T, hello map[int]fibp.Frame, on ...func(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool) []*fakeNode {
	nodes := make([]*fakeNode, len(on))
	status := &fibp.GetClusterStatusResult{MetaLeaderNodeID: 1}
	for i := range on {
		n := &fakeNode{id: uint64(i + 1), got: map[fibp.Opcode][]time.Time{}, on: on[i]}
		opts := fibptest.Options{NodeID: n.id, Handler: func(c *fibptest.Conn, f fibptest.Frame) {
			n.mu.Lock()
			n.got[f.Header.Opcode] = append(n.got[f.Header.Opcode], time.Now())
			n.mu.Unlock()
			if _, ok := f.Frame.(*fibp.GetClusterStatus); ok {
				c.Reply(f, status)
				return
			}
			if !n.on(n, c, f) {
				c.Reply(f, &fibp.Error{ErrorCode: fibp.CodeInternalError, Message: "the fake does not answer this"})
			}
		}}
		if h, ok := hello[i]; ok {
			opts.Handshake = func(*fibp.Handshake) fibp.Frame {
				n.mu.Lock()
				n.got[fibp.OpHandshake] = append(n.got[fibp.OpHandshake], time.Now())
				n.mu.Unlock()
				return h // nil: close the connection without an answer
			}
		}
		n.peer = fibptest.Start(t, opts)
		nodes[i] = n
		status.Nodes = append(status.Nodes, fibp.NodeStatus{NodeID: n.id, Addr: n.peer.Addr()})
	}
	return nodes
}

func enqueueOk(c *fibptest.Conn, f fibptest.Frame) {
	req := f.Frame.(*fibp.Enqueue)
	res := &fibp.EnqueueResult{Results: make([]fibp.EnqueueResultItem, len(req.Messages))}
	for i := range res.Results {
		res.Results[i].MessageID = wire.UUID{byte(i + 1)}
	}
	c.Reply(f, res)
}

func answersEnqueue(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool {
	if _, ok := f.Frame.(*fibp.Enqueue); ok {
		enqueueOk(c, f)
		return true
	}
	return false
}

// A node that cannot confirm its keys are current (AuthStateStale, in the Handshake or for a
// request) is left for another node, and the caller sees only the answer.
func TestClusterLeavesAStaleNode(t *testing.T) {
	stale := &fibp.Error{ErrorCode: fibp.CodeAuthStateStale, Message: "cannot confirm the keys are current"}
	nodes := startFakeCluster(t, map[int]fibp.Frame{2: stale},
		func(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool {
			if _, ok := f.Frame.(*fibp.Enqueue); ok {
				c.Reply(f, stale)
				return true
			}
			return false
		},
		answersEnqueue,
		answersEnqueue)
	ctx := context.Background()
	c, err := fila.DialCluster(ctx, []string{nodes[2].peer.Addr(), nodes[0].peer.Addr()}, nil)
	if err != nil {
		t.Fatalf("a seed answering AuthStateStale beside a good one: %v", err)
	}
	defer c.Close()
	res, err := c.Enqueue(ctx, fila.Message{Queue: "q", Payload: []byte("x")})
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue: %v %+v", err, res)
	}
	if a, b := nodes[0].count(fibp.OpEnqueue), nodes[1].count(fibp.OpEnqueue); a != 1 || b != 1 {
		t.Errorf("the stale node got %d enqueues, the next one %d: want 1 each", a, b)
	}
	if route, _ := c.Route("q"); route != nodes[1].peer.Addr() {
		t.Errorf("route %q, want the node that took it", route)
	}
}

// A whole Enqueue refused with ChannelFull and retry_after_ms is sent again no sooner than that.
func TestClusterHonoursRetryAfter(t *testing.T) {
	var mu sync.Mutex
	refused := false
	nodes := startFakeCluster(t, nil, func(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool {
		if _, ok := f.Frame.(*fibp.Enqueue); !ok {
			return false
		}
		mu.Lock()
		first := !refused
		refused = true
		mu.Unlock()
		if first {
			c.Reply(f, &fibp.Error{ErrorCode: fibp.CodeChannelFull, Metadata: map[string]string{fibp.MetaRetryAfterMs: "300"}})
		} else {
			enqueueOk(c, f)
		}
		return true
	})
	ctx := context.Background()
	c, err := fila.DialCluster(ctx, []string{nodes[0].peer.Addr()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Enqueue(ctx, fila.Message{Queue: "q", Payload: []byte("x")})
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue: %v %+v", err, res)
	}
	nodes[0].mu.Lock()
	at := nodes[0].got[fibp.OpEnqueue]
	nodes[0].mu.Unlock()
	if len(at) != 2 || at[1].Sub(at[0]) < 300*time.Millisecond {
		t.Errorf("enqueues at %v: want two, 300 ms apart at least", at)
	}
}

// A subscription follows NotLeader to the leader, moves when the leader ends it NotLeader naming
// its successor, and a delivery of the old leader is acked through the new one when the old one
// answers NotLeader.
func TestClusterConsumerFollowsTheLeader(t *testing.T) {
	var addrs []string
	var mu sync.Mutex
	leader := 1 // index of the node that leads q
	var subB fibptest.Frame
	var connB *fibptest.Conn
	on := func(i int) func(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool {
		return func(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool {
			mu.Lock()
			leads := leader == i
			mu.Unlock()
			switch req := f.Frame.(type) {
			case *fibp.Consume:
				if !leads {
					mu.Lock()
					to := addrs[leader]
					mu.Unlock()
					c.Reply(f, &fibp.Error{ErrorCode: fibp.CodeNotLeader, Metadata: map[string]string{fibp.MetaLeaderAddr: to}})
					return true
				}
				if i == 1 { // before the delivery: the test ends this subscription once it has it
					mu.Lock()
					subB, connB = f, c
					mu.Unlock()
				}
				c.Reply(f, &fibp.ConsumeOk{ConsumerID: "c"})
				c.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{{MessageID: wire.UUID{byte(10 + i)}, Queue: req.Queue,
					Payload: []byte{byte('a' + i)}, AttemptCount: 1, LeaseExpiresAt: uint64(time.Now().Add(time.Minute).UnixMilli())}}})
				return true
			case *fibp.Ack:
				res := &fibp.AckResult{Results: make([]fibp.AckResultItem, len(req.Items))}
				for k := range res.Results {
					if !leads {
						res.Results[k].ErrorCode = fibp.CodeNotLeader
					}
				}
				c.Reply(f, res)
				return true
			case *fibp.GetRoutes:
				mu.Lock()
				to := addrs[leader]
				mu.Unlock()
				c.Reply(f, &fibp.GetRoutesResult{Entries: []fibp.RouteEntry{{Queue: "q", LeaderNodeID: 1, LeaderAddr: to}}})
				return true
			case *fibp.CancelConsume:
				return true
			}
			return false
		}
	}
	nodes := startFakeCluster(t, nil, on(0), on(1))
	for _, n := range nodes {
		addrs = append(addrs, n.peer.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a safety net
	defer cancel()
	c, err := fila.DialCluster(ctx, []string{addrs[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Consume(ctx, "q", fila.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	first, err := sub.Next(ctx)
	if err != nil || string(first.Payload) != "b" || sub.Node() != addrs[1] {
		t.Fatalf("first delivery %+v %v from %s: want b from node 2", first, err, sub.Node())
	}
	// Node 2 is deposed: node 1 leads, and node 2 ends the subscription naming it.
	mu.Lock()
	leader = 0
	f, conn := subB, connB
	mu.Unlock()
	conn.Send(f.Header.RequestID, &fibp.Error{ErrorCode: fibp.CodeNotLeader, Metadata: map[string]string{fibp.MetaLeaderAddr: addrs[0]}})
	second, err := sub.Next(ctx)
	if err != nil || string(second.Payload) != "a" || sub.Moves() != 1 || sub.Node() != addrs[0] {
		t.Fatalf("after the move: %+v %v on %s, %d moves: want a from node 1, one move", second, err, sub.Node(), sub.Moves())
	}
	if err := first.Ack(ctx); err != nil {
		t.Errorf("ack of the old leader's delivery: %v", err)
	}
	if got := nodes[0].count(fibp.OpAck); got != 1 {
		t.Errorf("the new leader got %d acks, want the old leader's delivery's", got)
	}
	if errors.Is(sub.Err(), fila.ErrConsumerClosed) {
		t.Error("closed early")
	}
}

// With no node answering, a call pauses between rounds over the nodes (no busy loop) and fails
// with the last failure once its context ends.
func TestClusterWithNoNodeUpFailsWhenItsContextEnds(t *testing.T) {
	// The second node closes every connection at once: it is never up, and counts the attempts.
	nodes := startFakeCluster(t, map[int]fibp.Frame{1: nil}, answersEnqueue, answersEnqueue)
	ctx := context.Background()
	c, err := fila.DialCluster(ctx, []string{nodes[0].peer.Addr()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nodes[0].peer.Close()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = c.Enqueue(short, fila.Message{Queue: "q", Payload: []byte("x")})
	if err == nil {
		t.Fatal("an enqueue with every node down succeeded")
	}
	// A busy loop makes thousands in 500 ms; a backoff from 20 ms doubling, a handful.
	if n := nodes[1].count(fibp.OpHandshake); n > 50 {
		t.Errorf("%d handshakes with the node that closes connections in 500 ms", n)
	}
	t.Logf("every node down: %v; %d handshakes with the second node", err, nodes[1].count(fibp.OpHandshake))
}

// A ClusterProducer's message answered NotLeader with a route hint is sent again to the leader it
// names, and the next messages are batched for the leader straight away.
func TestClusterProducerFollowsHints(t *testing.T) {
	var leader string
	nodes := startFakeCluster(t, nil,
		func(n *fakeNode, c *fibptest.Conn, f fibptest.Frame) bool {
			req, ok := f.Frame.(*fibp.Enqueue)
			if !ok {
				return false
			}
			res := &fibp.EnqueueResult{Results: make([]fibp.EnqueueResultItem, len(req.Messages)),
				RouteHints: []fibp.RouteHint{{Queue: "q", LeaderNodeID: 2, LeaderAddr: leader}}}
			for i := range res.Results {
				res.Results[i].ErrorCode = fibp.CodeNotLeader
			}
			c.Reply(f, res)
			return true
		},
		answersEnqueue)
	leader = nodes[1].peer.Addr()
	ctx := context.Background()
	c, err := fila.DialCluster(ctx, []string{nodes[0].peer.Addr()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.NewProducer(fila.ProducerOptions{})
	for i := range 3 {
		if _, err := p.Send(ctx, fila.Message{Queue: "q", Payload: []byte("x")}); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if a, b := nodes[0].count(fibp.OpEnqueue), nodes[1].count(fibp.OpEnqueue); a != 1 || b != 3 {
		t.Errorf("the follower got %d Enqueue frames, the leader %d: want 1 and 3", a, b)
	}
}

// A call whose context ends while a node's handshake is under way fails as a whole: the caller
// is not handed a nil error with the context's failure hidden in each item.
func TestClusterCallEndingInAHandshakeFails(t *testing.T) {
	release := make(chan struct{})
	slow := fibptest.Start(t, fibptest.Options{NodeID: 2, Handshake: func(*fibp.Handshake) fibp.Frame {
		<-release // answers nothing until the test ends
		return nil
	}})
	t.Cleanup(func() { close(release) })
	status := &fibp.GetClusterStatusResult{MetaLeaderNodeID: 1}
	first := fibptest.Start(t, fibptest.Options{NodeID: 1, Handler: func(c *fibptest.Conn, f fibptest.Frame) {
		if _, ok := f.Frame.(*fibp.GetClusterStatus); ok {
			c.Reply(f, status)
			return
		}
		enqueueOk(c, f)
	}})
	status.Nodes = []fibp.NodeStatus{{NodeID: 1, Addr: first.Addr()}, {NodeID: 2, Addr: slow.Addr()}}
	ctx := context.Background()
	c, err := fila.DialCluster(ctx, []string{first.Addr()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first.Close()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err := c.Enqueue(short, fila.Message{Queue: "q", Payload: []byte("x")})
	if err == nil {
		t.Fatalf("the enqueue failed per item only: %+v", res)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's deadline", err)
	}
}
