package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Failover between real processes: a follower's death fails no request on the queue's leader, and
// a leader's death is followed by another node's leadership holding every acknowledged message.
// How long a failover takes is measured by tools/compare's cluster_failover, not here.

// subscribeOnLeader asks each node in turn for a subscription to queue until one takes it: the
// leader (the others answer NotLeader, or NodeNotReady while the group elects). It returns the
// node and the subscribed connection, whose credit is unlimited: a probe that let go of its
// subscription would leave the messages it was sent leased. An enqueue cannot tell the leader
// apart once a follower hands enqueues to it.
func subscribeOnLeader(t *testing.T, nodes []*clusterProc, queue string) (*clusterProc, *fibptest.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for {
		for _, n := range nodes {
			c := fibptest.Dial(t, n.addrs.FIBP)
			c.Handshake()
			c.Send(1, &fibp.Consume{Queue: queue})
			if _, f := c.Next(); f.Opcode() == fibp.OpConsumeOk {
				return n, c
			}
			c.NC.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node took a subscription to %s within a minute", queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// routedLeader asks every node which node leads queue (GetRoutes: the leader its replica of the
// group knows) until they all name the same one, and returns it. Unlike a subscription, asking
// leases nothing.
func routedLeader(t *testing.T, nodes []*clusterProc, queue string) *clusterProc {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for {
		var named uint64
		agree := true
		for _, n := range nodes {
			c := fibptest.Dial(t, n.addrs.FIBP)
			c.Handshake()
			r := c.Call(1, &fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: queue}}}).(*fibp.GetRoutesResult)
			c.NC.Close()
			var id uint64
			if r.ErrorCode == fibp.CodeOk && len(r.Entries) == 1 {
				id = r.Entries[0].LeaderNodeID
			}
			if id == 0 || (named != 0 && id != named) {
				agree = false
			}
			named = id
		}
		if agree {
			for _, n := range nodes {
				if uint64(n.id) == named {
					return n
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes do not agree on a leader of %s within a minute", queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delivered reads deliveries from c until it has every payload (and fails on one it did not
// expect), and returns their IDs.
func delivered(t *testing.T, c *fibptest.Client, payloads ...string) [][16]byte {
	t.Helper()
	want := map[string]bool{}
	for _, p := range payloads {
		want[p] = true
	}
	var ids [][16]byte
	for _, d := range c.Deliveries(len(payloads)) {
		if !want[string(d.Payload)] {
			t.Fatalf("delivered %q; want %q", d.Payload, payloads)
		}
		delete(want, string(d.Payload))
		ids = append(ids, d.MessageID)
	}
	if len(want) > 0 {
		t.Fatalf("not delivered: %v", want)
	}
	return ids
}

// enqueueOn enqueues payload on node n, which must answer Ok.
func enqueueOn(t *testing.T, n *clusterProc, queue, payload string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for {
		c := fibptest.Dial(t, n.addrs.FIBP)
		c.Handshake()
		r := c.Call(1, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: queue, Payload: []byte(payload)}}}).(*fibp.EnqueueResult)
		c.NC.Close()
		code := r.Results[0].ErrorCode
		if code == fibp.CodeOk {
			return
		}
		// NodeNotReady: the group has no leader yet (a queue just created, whose placement
		// GetRoutes names before its election ends); nothing was stored, and the answer says retry.
		if code != fibp.CodeNodeNotReady || time.Now().After(deadline) {
			t.Fatalf("enqueue of %q on node %d: %v", payload, n.id, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A queue's leader goes on with one follower when the other is killed: the group keeps its
// quorum, so no enqueue, delivery or ack on the leader fails, before or after the kill.
func TestAFollowersDeathFailsNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin)
	leader, cons := subscribeOnLeader(t, nodes, "orders")
	enqueueOn(t, leader, "orders", "m0")
	var follower *clusterProc
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	prod := fibptest.Dial(t, leader.addrs.FIBP)
	prod.Handshake()
	const total = 200
	for i := 1; i <= total; i++ {
		if i == total/2 {
			follower.p.cmd.Process.Signal(syscall.SIGKILL)
			follower.p.wait()
			t.Logf("node %d leads orders; node %d killed after %d enqueues", leader.id, follower.id, i-1)
		}
		msg := fibp.EnqueueMessage{Queue: "orders", Payload: fmt.Appendf(nil, "m%d", i)}
		r := prod.Call(uint32(i), &fibp.Enqueue{Messages: []fibp.EnqueueMessage{msg}}).(*fibp.EnqueueResult)
		if code := r.Results[0].ErrorCode; code != fibp.CodeOk {
			t.Fatalf("enqueue m%d on the leader (the follower killed after m%d): %v", i, total/2-1, code)
		}
	}
	var payloads []string
	for i := 0; i <= total; i++ {
		payloads = append(payloads, fmt.Sprintf("m%d", i))
	}
	ack := &fibp.Ack{}
	for _, id := range delivered(t, cons, payloads...) {
		ack.Items = append(ack.Items, fibp.AckItem{Queue: "orders", MessageID: id})
	}
	r := cons.Call(2, ack).(*fibp.AckResult)
	for i, res := range r.Results {
		if res.ErrorCode != fibp.CodeOk {
			t.Fatalf("ack of item %d after the follower's death: %v", i, res.ErrorCode)
		}
	}
}

// When a queue's leader is killed, one of the two other nodes takes over the queue with every
// message an enqueue was answered Ok for, and the killed node, started again, follows it.
func TestALeadersDeathHandsTheQueueOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, addrs := formCluster(t, bin)
	old := routedLeader(t, nodes, "orders")
	enqueueOn(t, old, "orders", "before")
	var rest []*clusterProc
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	old.p.cmd.Process.Signal(syscall.SIGKILL)
	old.p.wait()
	killed := time.Now()
	leader, cons := subscribeOnLeader(t, rest, "orders")
	t.Logf("node %d killed; node %d leads orders %v later", old.id, leader.id, time.Since(killed).Round(time.Millisecond))
	enqueueOn(t, leader, "orders", "after")
	ack := &fibp.Ack{}
	for _, id := range delivered(t, cons, "before", "after") {
		ack.Items = append(ack.Items, fibp.AckItem{Queue: "orders", MessageID: id})
	}
	for i, res := range cons.Call(2, ack).(*fibp.AckResult).Results {
		if res.ErrorCode != fibp.CodeOk {
			t.Fatalf("ack of item %d on the new leader: %v", i, res.ErrorCode)
		}
	}
	cons.NC.Close()

	// Started again (no initial_cluster: its data directory knows the cluster), the old leader
	// follows, and the queue has a leader that takes an enqueue and delivers it.
	restart := time.Now()
	old.launch(t, bin, addrs[old.id-1])
	old.addrs = waitAddrFile(t, old.addrFile, old.p)
	t.Logf("node %d ready %v after its start", old.id, time.Since(restart).Round(time.Millisecond))
	again, c := subscribeOnLeader(t, nodes, "orders")
	enqueueOn(t, again, "orders", "later")
	delivered(t, c, "later")
	t.Logf("node %d leads orders once node %d is back", again.id, old.id)
}
