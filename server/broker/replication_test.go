package broker

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/storage"
)

type testNode struct {
	db  *storage.DB
	fsm *queueFSM
	g   *raftgroup.Group
}

// The seam for more nodes: a queue group replicated on three in-process nodes (hashicorp/raft's
// in-memory transport between them) runs the same state machine as a single node. Its leader
// commits enqueues, leases and acks; when that leader stops, another node takes over and holds
// every committed message, with its lease and its body.
func TestAQueueGroupFailsOverToAReplicaWithEveryCommittedMessage(t *testing.T) {
	const n = 3
	addrs := make([]raft.ServerAddress, n)
	trans := make([]*raft.InmemTransport, n)
	var peers []raft.Server
	for i := range n {
		addrs[i], trans[i] = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("node%d", i)))
		peers = append(peers, raft.Server{ID: raft.ServerID(addrs[i]), Address: addrs[i]})
	}
	for i := range n {
		for j := range n {
			if i != j {
				trans[i].Connect(addrs[j], trans[j])
			}
		}
	}
	nodes := make([]*testNode, n)
	for i := range n {
		db, err := storage.Open(t.TempDir(), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := queuegroup.New("q", "q.dlq", engine.DefaultConfig(), engine.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		fsm, err := newQueueFSM(db, "q", st, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		logs, _, err := db.QueueLog("q", queuegroup.Bodies{})
		if err != nil {
			t.Fatal(err)
		}
		// The leader's lease is the heartbeat timeout: at 100 ms a loaded machine (three nodes
		// fsyncing in one process beside other tests) let it lapse mid-commit ("leadership lost
		// while committing log"); a second still fails over within waitLeader's bound.
		g, err := raftgroup.Open(raftgroup.Config{Store: logs, Snapshots: raft.NewInmemSnapshotStore(), LocalID: peers[i].ID,
			Transport: trans[i], Peers: peers, HeartbeatTimeout: time.Second, Logger: hclog.NewNullLogger()}, fsm)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &testNode{db: db, fsm: fsm, g: g}
		t.Cleanup(func() { _ = g.Shutdown(); db.Close() })
	}
	first := waitLeader(t, nodes, -1)
	l := nodes[first]
	if err := l.g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	st := l.fsm.take()
	st.Lead(1)
	st.Record(true)
	propose := func() {
		t.Helper()
		f := l.g.Propose(st.TakeEntry())
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		if err, ok := f.Response().(error); ok && err != nil {
			t.Fatal(err)
		}
	}
	var ids []engine.MsgID
	for round := range 10 {
		c := queuelog.Enqueue{At: int64(1000 + round)}
		for k := range 10 {
			id := engine.MsgID{0: byte(round), 1: byte(k), 15: 1}
			ids = append(ids, id)
			c.Messages = append(c.Messages, queuelog.LogMessage{ID: wire.UUID(id), FairnessKey: fmt.Sprint("k", k%3), Weight: 1,
				NotBefore: int64(1000 + round), Payload: []byte(fmt.Sprint("body ", round, k))})
		}
		if err := st.Enqueue(&c); err != nil {
			t.Fatal(err)
		}
		propose()
	}
	q := st.Lane(queuegroup.LaneQueue)
	_ = q.Subscribe("c", 0)
	st.LogLeases(queuegroup.LaneQueue, true)
	leases := st.Dispatch(queuegroup.LaneQueue, 2000, 5, nil)
	for _, le := range leases[:2] {
		if err := st.Ack(queuegroup.LaneQueue, le.ID, 2000); err != nil {
			t.Fatal(err)
		}
	}
	propose()
	acked := map[engine.MsgID]bool{leases[0].ID: true, leases[1].ID: true}

	if err := l.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	next := nodes[waitLeader(t, nodes, first)]
	if err := next.g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	taken := next.fsm.take()
	nq := taken.Lane(queuegroup.LaneQueue)
	if nq.Len() != len(ids)-len(acked) {
		t.Fatalf("the new leader holds %d messages, want %d", nq.Len(), len(ids)-len(acked))
	}
	for _, id := range ids {
		m, ok := nq.Get(id)
		if acked[id] {
			if ok {
				t.Fatalf("acked %v is back on the new leader", id)
			}
			continue
		}
		if !ok {
			t.Fatalf("committed %v is missing on the new leader", id)
		}
		if body, err := next.db.ReadBody("q", id); err != nil || len(body.Payload) == 0 {
			t.Fatalf("body of %v on the new leader: %v", id, err)
		}
		wantLeased := false
		for _, le := range leases[2:] {
			wantLeased = wantLeased || le.ID == id
		}
		if (m.State == engine.StateLeased) != wantLeased {
			t.Fatalf("%v is %v on the new leader; leased before the failover: %v", id, m.State, wantLeased)
		}
	}
	// The new leader serves them: everything not leased is delivered.
	_ = nq.Subscribe("c2", 0)
	got := nq.Dispatch(3000, 1000, nil)
	if len(got) != len(ids)-len(leases) {
		t.Fatalf("the new leader delivered %d, want %d", len(got), len(ids)-len(leases))
	}
}

// waitLeader returns the index of the node that leads, other than not.
func waitLeader(t *testing.T, nodes []*testNode, not int) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for i, nd := range nodes {
			if i != not && nd.g.Leader() {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader")
	return -1
}
