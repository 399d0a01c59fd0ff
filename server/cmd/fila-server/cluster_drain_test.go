package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Three real processes, each queue group on two of them (--replication 2): MoveQueueLeader moves
// a queue's leadership to a member of its group (GetRoutes names it), answers NodeNotFound for a
// node that is not one and QueueNotFound for an unknown queue; DrainNode of an unknown node
// answers NodeNotFound. A drained node leads no queue and shows draining in every node's
// GetClusterStatus; stopped and started again, it still drains and leads nothing; undrained, it
// shows up again.

// admin sends one admin request to node n and returns its answer.
func admin(t *testing.T, n *clusterProc, req fibp.Frame) fibp.Frame {
	t.Helper()
	c := fibptest.Dial(t, n.addrs.FIBP)
	defer c.NC.Close()
	c.Handshake()
	return c.Call(1, req)
}

// move sends MoveQueueLeader to node n and returns its result's code; an Error frame (a failed
// transfer) fails the test with its reason.
func move(t *testing.T, n *clusterProc, queue string, target int) fibp.ErrorCode {
	t.Helper()
	switch r := admin(t, n, &fibp.MoveQueueLeader{Queue: queue, TargetNodeID: uint64(target)}).(type) {
	case *fibp.MoveQueueLeaderResult:
		return r.ErrorCode
	case *fibp.Error:
		t.Fatalf("MoveQueueLeader %s to node %d through node %d: %v: %s", queue, target, n.id, r.ErrorCode, r.Message)
	default:
		t.Fatalf("MoveQueueLeader answered %T", r)
	}
	return 0
}

// routes asks node n which node leads each queue (0: it knows none).
func routes(t *testing.T, n *clusterProc) map[string]uint64 {
	t.Helper()
	r := admin(t, n, &fibp.GetRoutes{}).(*fibp.GetRoutesResult)
	if r.ErrorCode != fibp.CodeOk {
		t.Fatalf("GetRoutes on node %d: %v", n.id, r.ErrorCode)
	}
	out := map[string]uint64{}
	for _, e := range r.Entries {
		out[e.Queue] = e.LeaderNodeID
	}
	return out
}

// nodeStatus is node id's line of node n's GetClusterStatus.
func nodeStatus(t *testing.T, n *clusterProc, id int) fibp.NodeStatus {
	t.Helper()
	for _, s := range clusterStatus(t, n).Nodes {
		if s.NodeID == uint64(id) {
			return s
		}
	}
	return fibp.NodeStatus{State: fibp.NodeStateUnreachable}
}

// leadsNone reports whether node n knows a leader of each of queues, none of them node id.
func leadsNone(t *testing.T, n *clusterProc, queues []string, id int) bool {
	r := routes(t, n)
	for _, q := range queues {
		if r[q] == 0 || r[q] == uint64(id) {
			return false
		}
	}
	return true
}

func TestDrainAndMoveOnProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, addrs := formCluster(t, bin, "--replication", "2")
	queues := []string{"orders"}
	for i := range 5 {
		q := fmt.Sprintf("q%d", i)
		if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		queues = append(queues, q)
	}
	for _, q := range queues { // every group has elected its leader
		enqueueOnLeader(t, nodes, q, "before")
	}

	// Bad input.
	if r := admin(t, nodes[1], &fibp.DrainNode{NodeID: 9, Drain: true}).(*fibp.DrainNodeResult); r.ErrorCode != fibp.CodeNodeNotFound {
		t.Errorf("DrainNode of node 9: %v, want NodeNotFound", r.ErrorCode)
	}
	if code := move(t, nodes[1], "nope", 1); code != fibp.CodeQueueNotFound {
		t.Errorf("MoveQueueLeader of an unknown queue: %v, want QueueNotFound", code)
	}
	if code := move(t, nodes[1], "orders", 9); code != fibp.CodeNodeNotFound {
		t.Errorf("MoveQueueLeader to node 9: %v, want NodeNotFound", code)
	}

	// Moves: of the three nodes, one is no member of each group (NodeNotFound); a move to either
	// member makes it the leader, as the target itself says.
	for _, q := range queues[:3] {
		notMember := 0
		for _, target := range nodes {
			switch code := move(t, nodes[2], q, target.id); code {
			case fibp.CodeNodeNotFound:
				notMember++
			case fibp.CodeOk:
				waitFor(t, fmt.Sprintf("node %d leads %s after the move", target.id, q), func() bool {
					return routes(t, target)[q] == uint64(target.id)
				})
			default:
				t.Fatalf("MoveQueueLeader %s to node %d: %v", q, target.id, code)
			}
		}
		if notMember != 1 {
			t.Errorf("%s: %d nodes answered NodeNotFound, want the one that is no member", q, notMember)
		}
	}

	// Drain the node that leads the most queues, through another node.
	drained := nodes[0]
	most := -1
	for _, n := range nodes {
		if c := int(nodeStatus(t, nodes[0], n.id).QueueLeaderships); c > most {
			drained, most = n, c
		}
	}
	t.Logf("draining node %d, which leads %d queues", drained.id, most)
	other := nodes[(drained.id)%3]
	if r := admin(t, other, &fibp.DrainNode{NodeID: uint64(drained.id), Drain: true}).(*fibp.DrainNodeResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DrainNode: %v", r.ErrorCode)
	}
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d sees node %d draining and leading nothing", n.id, drained.id), func() bool {
			s := nodeStatus(t, n, drained.id)
			return s.State == fibp.NodeStateDraining && s.QueueLeaderships == 0 && leadsNone(t, n, queues, drained.id) &&
				clusterStatus(t, n).MetaLeaderNodeID != uint64(drained.id)
		})
	}
	for _, q := range queues {
		if l := enqueueOnLeader(t, nodes, q, "while drained"); l == drained {
			t.Errorf("the drained node took an enqueue to %s as its leader", q)
		}
	}

	// Stopped and started again, the drained node still drains and leads nothing.
	drained.p.cmd.Process.Signal(syscall.SIGTERM)
	drained.p.wait()
	drained.launch(t, bin, addrs[drained.id-1])
	drained.addrs = waitAddrFile(t, drained.addrFile, drained.p)
	waitFor(t, "the restarted node says it drains and leads nothing", func() bool {
		s := nodeStatus(t, drained, drained.id)
		return s.State == fibp.NodeStateDraining && s.QueueLeaderships == 0 && leadsNone(t, drained, queues, drained.id)
	})
	for _, q := range queues {
		if l := enqueueOnLeader(t, nodes, q, "after the restart"); l == drained {
			t.Errorf("the restarted drained node took an enqueue to %s as its leader", q)
		}
	}

	// Undrained, it is up again, and may lead: a move to it works.
	if r := admin(t, other, &fibp.DrainNode{NodeID: uint64(drained.id), Drain: false}).(*fibp.DrainNodeResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DrainNode(false): %v", r.ErrorCode)
	}
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d sees node %d up", n.id, drained.id), func() bool {
			return nodeStatus(t, n, drained.id).State == fibp.NodeStateUp
		})
	}
	for _, q := range queues {
		code := move(t, other, q, drained.id)
		if code == fibp.CodeNodeNotFound {
			continue // no member of this group
		}
		if code != fibp.CodeOk {
			t.Fatalf("MoveQueueLeader %s to the undrained node: %v", q, code)
		}
		waitFor(t, fmt.Sprintf("node %d leads %s", drained.id, q), func() bool { return routes(t, drained)[q] == uint64(drained.id) })
		expectDelivered(t, drained, q, "before", "while drained", "after the restart")
		break
	}
}

// TestMeasureDrain (FILA_MEASURE_DRAIN=N only) creates N queues on three processes, kept awake
// (queue_idle_timeout 1h), and measures how long a drain of the node leading the most of them
// takes, from DrainNode until every node's GetClusterStatus shows it leading none and every
// node's GetRoutes names another leader of each queue.
func TestMeasureDrain(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_DRAIN"))
	if n <= 0 {
		t.Skip("FILA_MEASURE_DRAIN=N measures a drain of N queues' leaderships on three nodes")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin, "--queue-idle-timeout", "1h")
	c := fibptest.Dial(t, nodes[0].addrs.FIBP)
	defer c.NC.Close()
	c.Handshake()
	var queues []string
	for i := range n {
		q := fmt.Sprintf("m%04d", i)
		if r := c.Call(uint32(i+2), &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		queues = append(queues, q)
	}
	waitFor(t, "every queue has a leader", func() bool { return leadsNone(t, nodes[0], queues, 0) })
	st := clusterStatus(t, nodes[0])
	drained, most := nodes[0], uint32(0)
	for _, s := range st.Nodes {
		if s.QueueLeaderships > most {
			drained, most = nodes[s.NodeID-1], s.QueueLeaderships
		}
	}
	other := nodes[drained.id%3]
	start := time.Now()
	if r := admin(t, other, &fibp.DrainNode{NodeID: uint64(drained.id), Drain: true}).(*fibp.DrainNodeResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DrainNode: %v", r.ErrorCode)
	}
	waitFor(t, "the drained node leads nothing", func() bool {
		for _, n := range nodes {
			if s := nodeStatus(t, n, drained.id); s.State != fibp.NodeStateDraining || s.QueueLeaderships != 0 || !leadsNone(t, n, queues, drained.id) {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	t.Logf("%d queues: node %d's %d leaderships drained in %v (%.0f a second)", n, drained.id, most, took.Round(time.Millisecond),
		float64(most)/took.Seconds())
}
