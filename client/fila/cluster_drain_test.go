package fila_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Draining and moving leaders under load: a producer and a consumer per queue of Clusters
// dialled with every node as a seed go on while the node that leads the most queues is drained
// (it then leads none, and every node shows it draining), while another node is killed and
// started again during the drain (the elections it causes may hand the drained node a
// leadership, which it hands on), once it is undrained, and while queues are moved to it. No call
// returns an error, and every enqueue answered Ok is delivered.

// drainProbe asks the cluster's nodes about leaderships.
type drainProbe struct {
	t   *testing.T
	ctx context.Context
	tc  *testCluster
}

// client dials node n alone.
func (p drainProbe) client(n *clusterNode) *fila.Client {
	p.t.Helper()
	c, err := fila.Dial(p.ctx, n.addr, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// status is node n's cluster status (nil while it does not answer).
func (p drainProbe) status(n *clusterNode) *fila.ClusterStatus {
	c, err := fila.Dial(p.ctx, n.addr, nil)
	if err != nil {
		return nil
	}
	defer c.Close()
	st, err := c.GetClusterStatus(p.ctx)
	if err != nil {
		return nil
	}
	return st
}

// leaders is which node leads each queue as node n knows it (nil while it does not answer).
func (p drainProbe) leaders(n *clusterNode) map[string]uint64 {
	c, err := fila.Dial(p.ctx, n.addr, nil)
	if err != nil {
		return nil
	}
	defer c.Close()
	routes, err := c.GetRoutes(p.ctx)
	if err != nil {
		return nil
	}
	out := map[string]uint64{}
	for _, r := range routes {
		out[r.Queue] = r.LeaderNodeID
	}
	return out
}

// waitFor polls cond until it holds, failing the test when the context ends first.
func (p drainProbe) waitFor(what string, cond func() bool) {
	p.t.Helper()
	for !cond() {
		if p.ctx.Err() != nil {
			p.t.Fatalf("never true: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leadsNone reports whether node n knows a leader of each of queues, none of them in not.
func (p drainProbe) leadsNone(n *clusterNode, queues []string, not ...int) bool {
	l := p.leaders(n)
	if l == nil {
		return false
	}
	for _, q := range queues {
		if l[q] == 0 {
			return false
		}
		for _, id := range not {
			if l[q] == uint64(id) {
				return false
			}
		}
	}
	return true
}

// state is node id's state and leaderships in st.
func state(st *fila.ClusterStatus, id int) (fila.NodeState, uint32) {
	for _, n := range st.Nodes {
		if n.NodeID == uint64(id) {
			return n.State, n.QueueLeaderships
		}
	}
	return fila.NodeStateUnreachable, 0
}

// createQueues creates queues through one node and waits until each takes an enqueue (a warm-up
// message): a node whose copy of the meta state has not applied the creation yet answers
// QueueNotFound meanwhile.
func createQueues(t *testing.T, ctx context.Context, tc *testCluster, queues ...string) {
	t.Helper()
	c := dialTestCluster(t, tc.seeds(), nil)
	defer c.Close()
	any, err := c.Any(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if _, err := any.CreateQueue(ctx, fila.QueueConfig{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range queues {
		for {
			res, err := c.Enqueue(ctx, fila.Message{Queue: q, Payload: []byte("warm-up")})
			if err == nil && res[0].Err == nil {
				break
			}
			if ctx.Err() != nil || err == nil && !errors.Is(res[0].Err, fila.ErrQueueNotFound) {
				t.Fatalf("first enqueue to %s: %v %+v", q, err, res)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestClusterDrainAndMoveUnderLoad(t *testing.T) {
	tc := startTestCluster(t)
	queues := []string{"d0", "d1", "d2", "d3", "d4"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*serverWait) // a safety net
	defer cancel()
	createQueues(t, ctx, tc, queues...)
	p := drainProbe{t: t, ctx: ctx, tc: tc}
	prod := dialTestCluster(t, tc.seeds(), nil)
	cons := dialTestCluster(t, tc.seeds(), nil)
	h := &history{acked: map[fila.MessageID]bool{}, delivered: map[fila.MessageID]int{}}

	var consumed sync.WaitGroup
	var subs []*fila.ClusterConsumer
	for _, q := range queues {
		sub, err := cons.Consume(ctx, q, fila.ConsumeOptions{MaxUnacked: 64})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
		consumed.Go(func() {
			for d := range sub.C() {
				h.mu.Lock()
				h.delivered[d.ID]++
				h.mu.Unlock()
				switch err := d.Ack(ctx); {
				case errors.Is(err, fila.ErrMessageNotFound):
					h.mu.Lock()
					h.ackLost++
					h.mu.Unlock()
				case err != nil:
					h.fail("ack", err)
				}
			}
		})
	}
	stopProducing := make(chan struct{})
	var produced sync.WaitGroup
	produced.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond) // pacing, so that the two cores are shared
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
				return
			case <-tick.C:
			}
			msgs := make([]fila.Message, len(queues))
			for k, q := range queues {
				key := fmt.Sprintf("%s-%d", q, i)
				msgs[k] = fila.Message{Queue: q, Payload: []byte(key), IdempotencyKey: key}
			}
			res, err := prod.Enqueue(ctx, msgs...)
			if err != nil {
				h.fail("enqueue", err)
				continue
			}
			h.mu.Lock()
			for _, r := range res {
				if r.Err == nil {
					h.acked[r.ID] = true
				}
			}
			h.mu.Unlock()
			for _, r := range res {
				if r.Err != nil {
					h.fail("enqueue item", r.Err)
				}
			}
		}
	})
	waitProgress := func(what string, n int) {
		t.Helper()
		target := h.ackedCount() + n
		for h.ackedCount() < target {
			if ctx.Err() != nil {
				t.Fatalf("%s: the producer made no progress (%d acknowledged)", what, h.ackedCount())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitProgress("before the drain", 100)

	// Drain the node that leads the most queues, through another node.
	st := p.status(tc.nodes[0])
	victim, most := tc.nodes[0], uint32(0)
	for _, n := range tc.nodes {
		if _, c := state(st, n.id); c >= most {
			victim, most = n, c
		}
	}
	var others []*clusterNode
	for _, n := range tc.nodes {
		if n != victim {
			others = append(others, n)
		}
	}
	adm := p.client(others[0])
	defer adm.Close()
	start := time.Now()
	if err := adm.DrainNode(ctx, uint64(victim.id), true); err != nil {
		t.Fatal(err)
	}
	for _, n := range tc.nodes {
		p.waitFor(fmt.Sprintf("node %d sees node %d drained", n.id, victim.id), func() bool {
			st := p.status(n)
			if st == nil || st.MetaLeaderNodeID == uint64(victim.id) {
				return false
			}
			s, c := state(st, victim.id)
			return s == fila.NodeStateDraining && c == 0 && p.leadsNone(n, queues, victim.id)
		})
	}
	t.Logf("node %d, leading %d of %d queues, drained in %v", victim.id, most, len(queues), time.Since(start).Round(time.Millisecond))
	waitProgress("while drained", 100)

	// Kill another node while the drain holds: its groups elect among the drained node and the
	// third, and the third leads them all.
	killed, third := others[1], others[0]
	killed.p.Kill()
	p.waitFor("the third node leads every queue", func() bool { return p.leadsNone(third, queues, victim.id, killed.id) })
	waitProgress("with one node killed and one drained", 100)
	if err := killed.start(); err != nil {
		t.Fatal(err)
	}
	p.waitFor("the drained node still leads nothing", func() bool {
		st := p.status(victim)
		if st == nil {
			return false
		}
		s, c := state(st, victim.id)
		return s == fila.NodeStateDraining && c == 0 && p.leadsNone(victim, queues, victim.id)
	})

	// Undrained, it may lead again: queues moved to it are led by it.
	if err := adm.DrainNode(ctx, uint64(victim.id), false); err != nil {
		t.Fatal(err)
	}
	p.waitFor("the undrained node is up", func() bool {
		st := p.status(third)
		s, _ := state(st, victim.id)
		return st != nil && s == fila.NodeStateUp
	})
	for _, q := range queues[:2] {
		if err := adm.MoveQueueLeader(ctx, q, uint64(victim.id)); err != nil {
			t.Fatalf("moving %s to node %d: %v", q, victim.id, err)
		}
		p.waitFor(fmt.Sprintf("node %d leads %s", victim.id, q), func() bool { return p.leaders(victim)[q] == uint64(victim.id) })
	}
	waitProgress("after the moves", 100)

	close(stopProducing)
	produced.Wait()
	for h.missing() > 0 {
		if ctx.Err() != nil {
			t.Fatalf("%d acknowledged enqueues were never delivered", h.missing())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, sub := range subs {
		sub.Close()
	}
	consumed.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	redelivered := 0
	for _, n := range h.delivered {
		redelivered += n - 1
	}
	t.Logf("%d enqueues acknowledged, all delivered; %d deliveries again, %d acks answered MessageNotFound", len(h.acked), redelivered, h.ackLost)
	for _, err := range h.errs {
		t.Error(err)
	}
}

// DrainNode of a node that is no member, MoveQueueLeader of an unknown queue or to an unknown
// node: NodeNotFound, QueueNotFound, NodeNotFound.
func TestClusterDrainAndMoveRefuseUnknowns(t *testing.T) {
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	createQueues(t, ctx, tc, "orders")
	c, err := fila.Dial(ctx, tc.nodes[1].addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.DrainNode(ctx, 9, true); !errors.Is(err, fila.ErrNodeNotFound) {
		t.Errorf("DrainNode(9): %v, want NodeNotFound", err)
	}
	if err := c.MoveQueueLeader(ctx, "nope", 1); !errors.Is(err, fila.ErrQueueNotFound) {
		t.Errorf("MoveQueueLeader of an unknown queue: %v, want QueueNotFound", err)
	}
	if err := c.MoveQueueLeader(ctx, "orders", 9); !errors.Is(err, fila.ErrNodeNotFound) {
		t.Errorf("MoveQueueLeader to node 9: %v, want NodeNotFound", err)
	}
}
