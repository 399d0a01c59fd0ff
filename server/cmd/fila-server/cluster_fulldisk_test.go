//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
	"github.com/filamq/fila/server/internal/testdisk"
)

// One node's disk fills up: the cluster goes on. Node 1's data directory is on a small tmpfs;
// once it is full (an enqueue through node 1 to a queue it leads answers StorageError), node 1
// leads no queue, the queues it led elect a leader among their other replicas, and every queue
// takes enqueues through every node — node 1 included, which forwards them — and a consumer
// through node 1 is sent to the queue's new leader. Once space
// is freed node 1 takes writes again and serves as before, and every message enqueued Ok is
// there (the one answered StorageError as the disk filled may be too: its outcome is unknown).
func TestAFullDiskOnOneNodeStopsNoQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	disk := testdisk.Tmpfs(t, 200)
	bin := buildServer(t)
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	founders := fmt.Sprintf("1=%s,2=%s,3=%s", addrs[0], addrs[1], addrs[2])
	nodes := []*clusterProc{{id: 1, dir: filepath.Join(disk, "node1")}, {id: 2, dir: t.TempDir()}, {id: 3, dir: t.TempDir()}}
	startCluster(t, bin, nodes, addrs, "--initial-cluster", founders)
	node1, node2 := nodes[0], nodes[1]
	setRebalancing(t, node1, fibp.RebalancingDisabled, 0) // leaderships move only as the test says
	queues := []string{"q0", "q1", "q2", "q3", "q4", "q5"}
	for _, q := range queues {
		if r := admin(t, node2, &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
	}
	waitFor(t, "node 1 leads q0", func() bool { return routes(t, node2)["q0"] == 1 || moveOrRetry(t, node2, "q0", 1) })
	stored := map[string]int{}
	for _, q := range queues {
		enqueueOnLeader(t, nodes, q, "before")
		stored[q]++
	}

	// Node 1's disk fills up.
	testdisk.Fill(t, filepath.Join(disk, "filler"))
	c1 := fibptest.Dial(t, node1.addrs.FIBP)
	c1.Handshake()
	big := bytes.Repeat([]byte("x"), 60<<10)
	full, unsure := false, 0
	for i := uint32(1); i < 2000 && !full; i++ {
		switch code := enqueueCode(c1, i, "q0", big); code {
		case fibp.CodeOk:
			stored["q0"]++
		case fibp.CodeStorageError:
			// Its outcome is unknown: the other replicas may have stored the entry that node 1
			// failed to, and the leader they elect then commits it.
			full, unsure = true, 1
		default:
			t.Fatalf("enqueue to q0 through node 1 as its disk fills: %v", code)
		}
	}
	if !full {
		t.Fatal("node 1's disk never refused a write")
	}
	testdisk.Fill(t, filepath.Join(disk, "filler2")) // what the store let go of to finish the writes in progress

	waitFor(t, "every queue led by node 2 or 3", func() bool {
		r := routes(t, node2)
		for _, q := range queues {
			if r[q] != 2 && r[q] != 3 {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		c := fibptest.Dial(t, n.addrs.FIBP)
		c.Handshake()
		for i, q := range queues {
			waitFor(t, fmt.Sprintf("an enqueue to %s through node %d answered Ok", q, n.id), func() bool {
				code := enqueueCode(c, uint32(100+i), q, []byte(fmt.Sprint("through ", n.id)))
				if code == fibp.CodeOk {
					stored[q]++
				}
				return code == fibp.CodeOk
			})
		}
		c.NC.Close()
	}
	// A consumer through node 1 is sent to q0's new leader, which delivers and takes the ack.
	leader := nodes[routes(t, node2)["q0"]-1]
	switch r := c1.Call(5000, &fibp.Consume{Queue: "q0", Credit: 1}).(type) {
	case *fibp.Error:
		if r.ErrorCode != fibp.CodeNotLeader || r.Metadata["leader_addr"] != leader.addrs.FIBP {
			t.Fatalf("Consume of q0 through node 1: %v %v, want NotLeader naming node %d at %s (the forwarded enqueues learnt it)",
				r.ErrorCode, r.Metadata, leader.id, leader.addrs.FIBP)
		}
	default:
		t.Fatalf("Consume of q0 through node 1, which no longer leads it, answered %T", r)
	}
	cl := fibptest.Dial(t, leader.addrs.FIBP)
	cl.Handshake()
	cl.Subscribe(1, "q0", 1)
	d := cl.Deliveries(1)[0]
	if r := cl.Call(5001, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q0", MessageID: d.MessageID}}}).(*fibp.AckResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("an ack on q0's new leader: %v", r.Results[0].ErrorCode)
	}
	stored["q0"]--
	cl.NC.Close()

	// Space again: node 1 takes writes, its replicas catch up, and it can lead again.
	for _, f := range []string{"filler", "filler2"} {
		if err := os.Remove(filepath.Join(disk, f)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "node 1 leads q0 again", func() bool { return moveOrRetry(t, node2, "q0", 1) })
	waitFor(t, "an enqueue to q0 on node 1 answered Ok", func() bool {
		code := enqueueCode(c1, 6000, "q0", []byte("after"))
		if code == fibp.CodeOk {
			stored["q0"]++
		}
		return code == fibp.CodeOk
	})
	for _, q := range queues {
		extra := 0
		if q == "q0" {
			extra = unsure
		}
		waitFor(t, fmt.Sprintf("%s holds its %d messages (%d more at most)", q, stored[q], extra), func() bool {
			n := depthOf(t, nodes[routes(t, node2)[q]-1], q)
			return n >= stored[q] && n <= stored[q]+extra
		})
	}
}

// enqueueCode enqueues one message to queue on c and returns its code.
func enqueueCode(c *fibptest.Client, reqID uint32, queue string, payload []byte) fibp.ErrorCode {
	switch r := c.Call(reqID, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: queue, Payload: payload}}}).(type) {
	case *fibp.EnqueueResult:
		return r.Results[0].ErrorCode
	case *fibp.Error:
		return r.ErrorCode
	}
	return fibp.CodeInternalError
}

// depthOf is queue's stored messages (ready and leased) as node n answers GetStats.
func depthOf(t *testing.T, n *clusterProc, queue string) int {
	t.Helper()
	r, ok := admin(t, n, &fibp.GetStats{Queue: queue}).(*fibp.GetStatsResult)
	if !ok || r.ErrorCode != fibp.CodeOk {
		return -1
	}
	return int(r.Depth + r.InFlight)
}
