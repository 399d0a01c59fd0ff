package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

// drainBroker is a cluster of nodes 1-3 whose node 2 leads three queues and the meta group until
// it is drained; then each GetClusterStatus finds one leadership fewer. It knows queue orders,
// replicated on nodes 1 and 2.
type drainBroker struct {
	mu       sync.Mutex
	draining bool
	left     uint32 // node 2's queue leaderships
	meta     uint64 // the meta leader
}

func (b *drainBroker) handle(c *fibptest.Conn, f fibptest.Frame) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch req := f.Frame.(type) {
	case *fibp.DrainNode:
		if req.NodeID > 3 {
			c.Reply(f, &fibp.DrainNodeResult{ErrorCode: fibp.CodeNodeNotFound})
			return
		}
		b.draining = req.Drain
		c.Reply(f, &fibp.DrainNodeResult{})
	case *fibp.GetClusterStatus:
		state := fibp.NodeStateUp
		if b.draining {
			state = fibp.NodeStateDraining
			switch {
			case b.left > 0:
				b.left--
			case b.meta == 2:
				b.meta = 1
			}
		}
		c.Reply(f, &fibp.GetClusterStatusResult{MetaLeaderNodeID: b.meta, Nodes: []fibp.NodeStatus{
			{NodeID: 1, Addr: "10.0.0.1:5555", State: fibp.NodeStateUp},
			{NodeID: 2, Addr: "10.0.0.2:5555", State: state, QueueLeaderships: b.left},
			{NodeID: 3, Addr: "10.0.0.3:5555", State: fibp.NodeStateUp},
		}})
	case *fibp.MoveQueueLeader:
		switch {
		case req.Queue != "orders":
			c.Reply(f, &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeQueueNotFound})
		case req.TargetNodeID != 1 && req.TargetNodeID != 2:
			c.Reply(f, &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeNodeNotFound})
		default:
			c.Reply(f, &fibp.MoveQueueLeaderResult{})
		}
	default:
		(&fakeBroker{}).handle(c, f)
	}
}

func TestClusterDrainShowsProgress(t *testing.T) {
	defer func(p time.Duration) { drainPoll = p }(drainPoll)
	drainPoll = time.Millisecond
	b := &drainBroker{left: 3, meta: 2}
	p := fibptest.Start(t, fibptest.Options{Handler: b.handle})
	out, errOut, code := runCLI(t, "--addr", p.Addr(), "cluster", "drain", "2")
	want := "node 2: 3 leaderships left\n" +
		"node 2: 2 leaderships left\n" +
		"node 2: 1 leadership left\n" +
		"node 2 is drained: it leads nothing, and stays so until 'fila cluster undrain 2'\n"
	if code != 0 || out != want {
		t.Errorf("exit %d, stderr %q, got:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	out, errOut, code = runCLI(t, "--addr", p.Addr(), "--json", "cluster", "drain", "2")
	if code != 0 || !strings.Contains(out, `"node_id": 2`) || !strings.Contains(out, `"queue_leaderships": 0`) || strings.Contains(out, "left") {
		t.Errorf("--json: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "cluster", "undrain", "2")
	if code != 0 || out != "node 2 is no longer draining: it may lead queues again\n" || b.draining {
		t.Errorf("undrain: exit %d:\n%s", code, out)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "cluster", "drain", "--no-wait", "3")
	if code != 0 || !strings.Contains(out, "node 3 is draining") {
		t.Errorf("--no-wait: exit %d:\n%s", code, out)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "--json", "cluster", "undrain", "3")
	if code != 0 || !strings.Contains(out, `"draining": false`) {
		t.Errorf("undrain --json: exit %d:\n%s", code, out)
	}
}

func TestClusterDrainAndMoveBadInput(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{Handler: (&drainBroker{}).handle})
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cluster", "drain", "9"}, 1, "fila: no node of the cluster has the ID 9 (see 'fila cluster status')"},
		{[]string{"cluster", "undrain", "9"}, 1, "fila: no node of the cluster has the ID 9"},
		{[]string{"cluster", "drain", "two"}, 2, `NODE_ID "two" is not a node ID`},
		{[]string{"cluster", "drain"}, 2, "cluster drain needs NODE_ID"},
		{[]string{"cluster", "move", "nope", "1"}, 1, `fila: queue "nope" does not exist`},
		{[]string{"cluster", "move", "orders", "3"}, 1, `fila: node 3 is no node of the cluster, or does not replicate queue "orders"`},
		{[]string{"cluster", "move", "orders"}, 2, "cluster move needs QUEUE NODE_ID"},
	} {
		_, errOut, code := runCLI(t, append([]string{"--addr", p.Addr()}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	out, errOut, code := runCLI(t, "--addr", p.Addr(), "cluster", "move", "orders", "2")
	if code != 0 || out != "node 2 leads queue orders now\n" {
		t.Errorf("move: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "--json", "cluster", "move", "orders", "1")
	if code != 0 || !strings.Contains(out, `"leader_node_id": 1`) {
		t.Errorf("move --json: exit %d:\n%s", code, out)
	}
}

// joinBroker lists node 4 only from its third status on, first unreachable, then up.
type joinBroker struct {
	mu    sync.Mutex
	asked int
}

func (b *joinBroker) handle(c *fibptest.Conn, f fibptest.Frame) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := f.Frame.(*fibp.GetClusterStatus); !ok {
		(&fakeBroker{}).handle(c, f)
		return
	}
	b.asked++
	nodes := []fibp.NodeStatus{{NodeID: 1, Addr: "10.0.0.1:5555", State: fibp.NodeStateUp, QueueLeaderships: 2}}
	switch {
	case b.asked == 3:
		nodes = append(nodes, fibp.NodeStatus{NodeID: 4, Addr: "10.0.0.4:5555", State: fibp.NodeStateUnreachable})
	case b.asked > 3:
		nodes = append(nodes, fibp.NodeStatus{NodeID: 4, Addr: "10.0.0.4:5555", State: fibp.NodeStateUp})
	}
	c.Reply(f, &fibp.GetClusterStatusResult{MetaLeaderNodeID: 1, Nodes: nodes})
}

func TestClusterJoinWaitsForTheNode(t *testing.T) {
	defer func(p time.Duration) { joinPoll = p }(joinPoll)
	joinPoll = time.Millisecond
	b := &joinBroker{}
	p := fibptest.Start(t, fibptest.Options{Handler: b.handle})
	out, errOut, code := runCLI(t, "--addr", p.Addr(), "cluster", "join", "4")
	if want := "node 4 is a member of the cluster: up, at 10.0.0.4:5555, leading 0 queues\n"; code != 0 || out != want || b.asked < 4 {
		t.Errorf("exit %d, stderr %q, asked %d times, got %q, want %q", code, errOut, b.asked, out, want)
	}
	out, errOut, code = runCLI(t, "--addr", p.Addr(), "cluster", "join", "--wait", "20ms", "7")
	if code == 0 || !strings.Contains(errOut, "node 7 has not joined within 20ms") || !strings.Contains(errOut, "--join") {
		t.Errorf("a node that never joins: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, code = runCLI(t, "--addr", p.Addr(), "cluster", "join", "x"); code == 0 || !strings.Contains(errOut, "NODE_ID") {
		t.Errorf("a bad node ID: exit %d, stderr %q", code, errOut)
	}
}
