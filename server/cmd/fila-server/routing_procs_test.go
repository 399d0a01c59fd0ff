package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Three real processes: every node names every node by its FIBP address (here the --listen's
// bound address, --advertise's default) in GetClusterStatus; a client connected to a node that
// does not lead a queue is told where the leader is (NotLeader's leader_addr, the EnqueueResult's
// route hint, GetRoutes) and succeeds there; a killed node shows unreachable.

// clusterStatus asks node n for the cluster's status.
func clusterStatus(t *testing.T, n *clusterProc) *fibp.GetClusterStatusResult {
	t.Helper()
	c := fibptest.Dial(t, n.addrs.FIBP)
	defer c.NC.Close()
	c.Handshake()
	return c.Call(1, &fibp.GetClusterStatus{}).(*fibp.GetClusterStatusResult)
}

// waitFor polls cond until it holds; the test fails after a minute (a safety net, not a bound).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after a minute: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClientsAreToldWhereTheLeaderIs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin)
	byAddr := map[string]*clusterProc{}
	for _, n := range nodes {
		byAddr[n.addrs.FIBP] = n
	}

	// Every node lists the three with their FIBP addresses, up, and a meta leader.
	for _, n := range nodes {
		waitFor(t, "node's status lists the three nodes at their addresses", func() bool {
			s := clusterStatus(t, n)
			if s.ErrorCode != fibp.CodeOk || s.MetaLeaderNodeID == 0 || len(s.Nodes) != 3 {
				return false
			}
			for i, ns := range s.Nodes {
				if ns.NodeID != uint64(i+1) || ns.Addr != nodes[i].addrs.FIBP || ns.State != fibp.NodeStateUp {
					return false
				}
			}
			return true
		})
	}

	// A Consume on a node that does not lead the queue: NotLeader naming the leader, where the
	// same Consume succeeds.
	var leader, follower *clusterProc
	waitFor(t, "a follower answers a Consume NotLeader with the leader's address", func() bool {
		for _, n := range nodes {
			c := fibptest.Dial(t, n.addrs.FIBP)
			c.Handshake()
			c.Send(1, &fibp.Consume{Queue: "orders", Credit: 10})
			_, f := c.Next()
			c.NC.Close()
			if e, ok := f.(*fibp.Error); ok && e.ErrorCode == fibp.CodeNotLeader && byAddr[e.Metadata[fibp.MetaLeaderAddr]] != nil {
				follower, leader = n, byAddr[e.Metadata[fibp.MetaLeaderAddr]]
				return leader != follower
			}
		}
		return false
	})
	t.Logf("node %d sends consumers of orders to node %d", follower.id, leader.id)
	// The node named may still be finishing the queue's first election (the follower names the
	// placement's preferred leader until its own replica knows the leader): NodeNotReady, retried
	// as a client does.
	waitFor(t, "the node named takes the Consume", func() bool {
		c := fibptest.Dial(t, leader.addrs.FIBP)
		defer c.NC.Close()
		c.Handshake()
		c.Send(1, &fibp.Consume{Queue: "orders", Credit: 10})
		switch _, f := c.Next(); f := f.(type) {
		case *fibp.ConsumeOk:
			return true
		case *fibp.Error:
			if f.ErrorCode == fibp.CodeNodeNotReady {
				return false
			}
			t.Fatalf("Consume on node %d answered %#v", leader.id, f)
		default:
			t.Fatalf("Consume on node %d answered %#v", leader.id, f)
		}
		return false
	})

	// An Enqueue there: forwarded to the leader, Ok with a route hint; GetRoutes names the same
	// leader.
	f := fibptest.Dial(t, follower.addrs.FIBP)
	f.Handshake()
	r := f.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "orders", Payload: []byte("x")}}}).(*fibp.EnqueueResult)
	if r.Results[0].ErrorCode != fibp.CodeOk || len(r.RouteHints) != 1 || r.RouteHints[0].LeaderAddr != leader.addrs.FIBP ||
		r.RouteHints[0].LeaderNodeID != uint64(leader.id) || r.RouteHints[0].Queue != "orders" {
		t.Errorf("enqueue on node %d: %+v, want Ok with a hint naming node %d at %s", follower.id, r, leader.id, leader.addrs.FIBP)
	}
	routes := f.Call(3, &fibp.GetRoutes{}).(*fibp.GetRoutesResult)
	if len(routes.Entries) != 2 { // orders and orders.dlq
		t.Fatalf("routes from node %d: %+v", follower.id, routes)
	}
	for _, e := range routes.Entries {
		if e.LeaderAddr != leader.addrs.FIBP || e.LeaderNodeID != uint64(leader.id) {
			t.Errorf("route from node %d: %+v, want node %d at %s", follower.id, e, leader.id, leader.addrs.FIBP)
		}
	}
	f.NC.Close()
	enqueueOnLeader(t, []*clusterProc{leader}, "orders", "routed")
	expectDelivered(t, leader, "orders", "routed")

	// A killed node shows unreachable to the others.
	var killed *clusterProc
	for _, n := range nodes {
		if n != leader {
			killed = n
		}
	}
	killed.p.cmd.Process.Signal(syscall.SIGKILL)
	killed.p.wait()
	for _, n := range nodes {
		if n == killed {
			continue
		}
		waitFor(t, "the others see the killed node unreachable", func() bool {
			s := clusterStatus(t, n)
			return len(s.Nodes) == 3 && s.Nodes[killed.id-1].State == fibp.NodeStateUnreachable &&
				s.Nodes[n.id-1].State == fibp.NodeStateUp
		})
	}
}
