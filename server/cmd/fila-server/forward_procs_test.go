package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Three real processes: a client connected to a follower of a queue enqueues and acknowledges
// through it (forwarded to the leader over the node link), and keeps enqueueing through it while
// the leader is killed with SIGKILL: every request is answered, each message Ok, NotLeader or
// NodeNotReady, and the new leader holds every message answered Ok and none acknowledged.
func TestAFollowerForwardsAcrossALeadersDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin)
	leader := enqueueOnLeader(t, nodes, "orders", "first")
	var follower *clusterProc
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	f := fibptest.Dial(t, follower.addrs.FIBP)
	f.Handshake()
	reqID := uint32(1)
	call := func(fr fibp.Frame) fibp.Frame { reqID++; return f.Call(reqID, fr) }
	enqueue := func(prefix string, n int) *fibp.EnqueueResult {
		var msgs []fibp.EnqueueMessage
		for i := range n {
			msgs = append(msgs, fibp.EnqueueMessage{Queue: "orders", Payload: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		return call(&fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult)
	}

	waitFor(t, "the follower knows the leader's address", func() bool { // recorded once each node started
		routes := call(&fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: "orders"}}}).(*fibp.GetRoutesResult)
		return len(routes.Entries) == 1 && routes.Entries[0].LeaderAddr == leader.addrs.FIBP
	})

	// 20 messages through the follower: Ok, with a hint naming the leader.
	r := enqueue("a", 20)
	for i, it := range r.Results {
		if it.ErrorCode != fibp.CodeOk {
			t.Fatalf("message %d through node %d: %v", i, follower.id, it.ErrorCode)
		}
	}
	if len(r.RouteHints) != 1 || r.RouteHints[0].LeaderAddr != leader.addrs.FIBP {
		t.Fatalf("route hints %+v, want one naming node %d at %s", r.RouteHints, leader.id, leader.addrs.FIBP)
	}

	// A consumer on the leader takes 11 ("first" and 10 of them) and goes away; their leases are
	// settled through the follower (a lease whose subscription ended is settled from anywhere).
	c := fibptest.Dial(t, leader.addrs.FIBP)
	c.Handshake()
	c.Subscribe(1, "orders", 11)
	ds := c.Deliveries(11)
	c.NC.Close()
	acked := map[string]bool{}
	var items []fibp.AckItem
	for _, d := range ds {
		acked[string(d.Payload)] = true
		items = append(items, fibp.AckItem{Queue: "orders", MessageID: d.MessageID})
	}
	var ar *fibp.AckResult
	waitFor(t, "the acks through the follower are answered Ok", func() bool { // the leader notices the consumer left
		ar = call(&fibp.Ack{Items: items}).(*fibp.AckResult)
		return ar.Results[0].ErrorCode == fibp.CodeOk
	})
	for i, it := range ar.Results {
		if it.ErrorCode != fibp.CodeOk {
			t.Fatalf("ack %d through node %d: %v", i, follower.id, it.ErrorCode)
		}
	}

	// The leader dies; the follower keeps taking enqueues, answering each.
	leader.p.cmd.Process.Signal(syscall.SIGKILL)
	leader.p.wait()
	killed := time.Now()
	want := map[string]bool{}
	for i := range 20 {
		if p := fmt.Sprint("a-", i); !acked[p] {
			want[p] = true
		}
	}
	codes := map[fibp.ErrorCode]int{}
	for round := 0; ; round++ {
		prefix := fmt.Sprint("b", round)
		r = enqueue(prefix, 5)
		ok := 0
		for i, it := range r.Results {
			codes[it.ErrorCode]++
			switch it.ErrorCode {
			case fibp.CodeOk:
				want[fmt.Sprintf("%s-%d", prefix, i)] = true
				ok++
			case fibp.CodeNotLeader, fibp.CodeNodeNotReady:
			default:
				t.Fatalf("message %d of round %d through node %d: %v", i, round, follower.id, it.ErrorCode)
			}
		}
		if ok == 5 {
			break
		}
		if time.Since(killed) > time.Minute {
			t.Fatalf("no enqueue through node %d was answered Ok within a minute of the leader's death: %v", follower.id, codes)
		}
		time.Sleep(20 * time.Millisecond) // a client's back-off
	}
	t.Logf("through node %d after node %d's death: %v, Ok again after %v", follower.id, leader.id, codes, time.Since(killed).Round(time.Millisecond))

	next := follower // no hint: the follower leads the queue now
	if len(r.RouteHints) > 0 {
		next = nil
		for _, n := range nodes {
			if n != leader && n.addrs.FIBP == r.RouteHints[0].LeaderAddr {
				next = n
			}
		}
	}
	if next == nil {
		t.Fatal("no node is named the new leader")
	}
	n := fibptest.Dial(t, next.addrs.FIBP)
	n.Handshake()
	n.Subscribe(1, "orders", 1000)
	for len(want) > 0 { // a message answered NodeNotReady may have been stored too
		for _, d := range n.Deliveries(1) {
			if acked[string(d.Payload)] {
				t.Fatalf("the new leader (node %d) delivered %q, acknowledged before the death", next.id, d.Payload)
			}
			delete(want, string(d.Payload))
		}
	}
}
