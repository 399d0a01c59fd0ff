package main

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// A cluster node stopped with SIGTERM hands its leaderships on before it exits: the moment it has
// exited, no other node still takes it for the leader of any of its queues (a node killed -9
// stays their leader until a heartbeat timeout passes), and the queues are served by the others.
func TestStoppedNodeHandsItsLeadershipsOn(t *testing.T) {
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin)
	queues := []string{"orders"}
	c := fibptest.Dial(t, nodes[0].addrs.FIBP)
	c.Handshake()
	for i := range 5 {
		q := fmt.Sprint("handoff", i)
		if r := c.Call(uint32(i+1), &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		queues = append(queues, q)
	}
	c.NC.Close()
	leaders := map[string]*clusterProc{}
	for _, q := range queues {
		leaders[q] = enqueueOnLeader(t, nodes, q, "before")
	}
	stopped := leaders["orders"]
	led := 0
	for _, l := range leaders {
		if l == stopped {
			led++
		}
	}
	if err := stopped.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := stopped.p.wait(); err != nil {
		t.Fatalf("node %d stopped with %v", stopped.id, err)
	}
	for _, n := range nodes {
		if n == stopped {
			continue
		}
		c := fibptest.Dial(t, n.addrs.FIBP)
		c.Handshake()
		r := c.Call(1, &fibp.GetRoutes{}).(*fibp.GetRoutesResult)
		c.NC.Close()
		for _, e := range r.Entries {
			if e.LeaderNodeID == uint64(stopped.id) {
				t.Fatalf("node %d, asked as soon as node %d (which led %d of the queues) exited on SIGTERM, still names it %s's leader", n.id, stopped.id, led, e.Queue)
			}
		}
	}
	var survivors []*clusterProc
	for _, n := range nodes {
		if n != stopped {
			survivors = append(survivors, n)
		}
	}
	for _, q := range queues {
		expectDelivered(t, enqueueOnLeader(t, survivors, q, "after"), q, "before", "after")
	}
}
