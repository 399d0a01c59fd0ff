package meta

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hosted is a Reconciler that keeps what its node was told to host, as the node registry will.
type hosted struct {
	self NodeID
	mu   sync.Mutex
	has  map[string][]NodeID // the groups this node hosts: their replicas
}

func (h *hosted) Assign(a Assignment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a.Has(h.self) {
		h.has[a.Name()] = a.Replicas
	} else {
		delete(h.has, a.Name())
	}
}

func (h *hosted) Drop(queue string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.has, queue)
}

func (h *hosted) groups() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for n := range h.has {
			if !yield(n) {
				return
			}
		}
	})
}

type member struct {
	id    NodeID
	fsm   *FSM
	host  *hosted
	raft  *raft.Raft
	trans *raft.InmemTransport
}

// startCluster starts n meta nodes on hashicorp/raft's in-memory transport and waits for a
// leader.
func startCluster(t *testing.T, n int) []*member {
	t.Helper()
	var ms []*member
	var servers []raft.Server
	for i := range n {
		id := NodeID(fmt.Sprintf("n%d", i+1))
		_, trans := raft.NewInmemTransport(raft.ServerAddress(id))
		host := &hosted{self: id, has: map[string][]NodeID{}}
		ms = append(ms, &member{id: id, fsm: New(Config{Self: id, Reconciler: host}), host: host, trans: trans})
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
	}
	for _, a := range ms {
		for _, b := range ms {
			a.trans.Connect(b.trans.LocalAddr(), b.trans)
		}
	}
	for _, m := range ms {
		conf := raft.DefaultConfig()
		conf.LocalID = raft.ServerID(m.id)
		conf.HeartbeatTimeout, conf.ElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
		conf.LeaderLeaseTimeout, conf.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
		conf.SnapshotThreshold = 1 << 30 // snapshots only when the test asks
		conf.TrailingLogs = 1            // and keeps almost no log: a late node needs the snapshot
		conf.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
		logs, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(conf, logs, logs, snaps, m.trans, raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(conf, m.fsm, logs, logs, snaps, m.trans)
		if err != nil {
			t.Fatal(err)
		}
		m.raft = r
		t.Cleanup(func() { _ = r.Shutdown().Error() })
	}
	leaderOf(t, ms)
	return ms
}

func leaderOf(t *testing.T, ms []*member) *member {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range ms {
			if m.raft.State() == raft.Leader {
				return m
			}
		}
	}
	t.Fatal("no leader")
	return nil
}

// propose commits cmds as one entry through the leader and returns the Apply response.
func propose(t *testing.T, leader *member, entry []byte) error {
	t.Helper()
	f := leader.raft.Apply(entry, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// eventually waits until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// Three nodes apply one meta log: their founding members are recorded, queues created through it
// appear on the nodes placement assigned through apply alone, two racing creations of one name
// have one winner on every node, and a node brought up by InstallSnapshot hosts what it should.
func TestThreeNodesThroughRaft(t *testing.T) {
	ms := startCluster(t, 3)
	leader := leaderOf(t, ms)
	for _, m := range ms {
		if err := propose(t, leader, Entry(PutNode(Node{ID: m.id, Address: string(m.id)}))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		if err := propose(t, leader, Entry(CreateQueue(queue(fmt.Sprintf("q%d", i)), 2, 0))); err != nil {
			t.Fatal(err)
		}
	}
	// Two nodes' CreateQueue of one name reach the leader at once.
	results := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			d := queue("race")
			d.MaxAttempts = uint32(i + 1)
			results[i] = propose(t, leader, Entry(CreateQueue(d, 3, 0)))
		})
	}
	wg.Wait()
	if (results[0] == nil) == (results[1] == nil) || refusedCode(errors.Join(results...)) != CodeQueueExists {
		t.Fatalf("racing creations answered %v and %v, want one success and one queue_exists", results[0], results[1])
	}
	if err := leader.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	want := leader.fsm.Catalog().Assignments()
	for _, m := range ms {
		eventually(t, string(m.id)+" hosts its assignments", func() bool {
			var names []string
			for _, a := range want {
				if a.Has(m.id) {
					names = append(names, a.Name())
				}
			}
			return slices.Equal(m.host.groups(), names)
		})
		eventually(t, string(m.id)+" applied everything", func() bool { return m.fsm.Catalog().Groups() == 7 })
		got, _ := m.fsm.Catalog().Queue("race")
		lead, _ := leader.fsm.Catalog().Queue("race")
		if got.MaxAttempts != lead.MaxAttempts {
			t.Errorf("%s holds the race's definition with %d attempts, the leader %d", m.id, got.MaxAttempts, lead.MaxAttempts)
		}
	}
	// A node that missed everything is brought up by a snapshot.
	if err := leader.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m != leader {
			if err := m.raft.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	late := &member{id: "n4"}
	_, late.trans = raft.NewInmemTransport("n4")
	late.host = &hosted{self: "n4", has: map[string][]NodeID{}}
	late.fsm = New(Config{Self: "n4", Reconciler: late.host})
	for _, m := range ms {
		m.trans.Connect("n4", late.trans)
		late.trans.Connect(m.trans.LocalAddr(), m.trans)
	}
	conf := raft.DefaultConfig()
	conf.LocalID = "n4"
	conf.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
	logs := raft.NewInmemStore()
	r, err := raft.NewRaft(conf, late.fsm, logs, logs, raft.NewInmemSnapshotStore(), late.trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	if err := leader.raft.AddNonvoter("n4", "n4", 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if err := propose(t, leader, Entry(PutNode(Node{ID: "n4", Address: "n4"}), CreateQueue(queue("after"), 1, 0))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n4 caught up", func() bool { return late.fsm.Catalog().Groups() == 8 })
	if r.Stats()["last_snapshot_index"] == "0" {
		t.Error("n4 caught up without InstallSnapshot")
	}
	if got := late.host.groups(); !slices.Equal(got, []string{"after"}) {
		t.Errorf("n4 hosts %q, want [after] (the least loaded node)", got)
	}
	if !slices.EqualFunc(late.fsm.Catalog().Assignments(), leader.fsm.Catalog().Assignments(), func(a, b Assignment) bool {
		return a.Name() == b.Name() && slices.Equal(a.Replicas, b.Replicas)
	}) {
		t.Error("n4's assignments differ from the leader's")
	}
}
