package broker

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/raftstore"
	"github.com/filamq/fila/server/storage"
)

// snapNode is a queue group "q" on its own Pebble store, as the broker opens one.
type snapNode struct {
	db    *storage.DB
	fsm   *queueFSM
	g     *raftgroup.Group
	snaps raft.SnapshotStore
}

// openSnapNode opens group "q" on a fresh store; c gives its peers (nil: a node alone).
func openSnapNode(t testing.TB, c raftgroup.Config) *snapNode {
	t.Helper()
	db, err := storage.Open(t.TempDir(), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fsm := newSnapFSM(t, db)
	logs, snaps, err := db.QueueLog("q", queuegroup.Bodies{})
	if err != nil {
		t.Fatal(err)
	}
	c.Store, c.Snapshots = logs, fsm.attach(logs, snaps)
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	g, err := raftgroup.Open(c, fsm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown(); db.Close() })
	return &snapNode{db: db, fsm: fsm, g: g, snaps: snaps}
}

func newSnapFSM(t testing.TB, db storage.Store) *queueFSM {
	t.Helper()
	st, err := queuegroup.New("q", "q.dlq", engine.DefaultConfig(), engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	fsm, err := newQueueFSM(db, "q", st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return fsm
}

// snapLeader drives a group's leading state as the actor does.
type snapLeader struct {
	t     testing.TB
	g     *raftgroup.Group
	st    *queuegroup.State
	round int
	// bodies of the messages enqueued and not acked, by ID
	bodies map[engine.MsgID]string
}

func lead(t testing.TB, n *snapNode) *snapLeader {
	t.Helper()
	if err := n.g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	st := n.fsm.take()
	st.Lead(n.g.Term())
	st.Record(true)
	return &snapLeader{t: t, g: n.g, st: st, bodies: map[engine.MsgID]string{}}
}

func (l *snapLeader) propose() {
	l.t.Helper()
	f := l.g.Propose(l.st.TakeEntry())
	if err := f.Error(); err != nil {
		l.t.Fatal(err)
	}
	if err, ok := f.Response().(error); ok && err != nil {
		l.t.Fatal(err)
	}
}

// enqueue commits one entry of n messages, each with its own body and a header.
func (l *snapLeader) enqueue(n int) []engine.MsgID { return l.enqueueSized(n, 0) }

// enqueueSized is enqueue with payloads of size bytes (their own text when 0).
func (l *snapLeader) enqueueSized(n, size int) []engine.MsgID {
	l.t.Helper()
	l.round++
	at := int64(1000 + l.round)
	c := queuelog.Enqueue{At: at}
	var ids []engine.MsgID
	for k := range n {
		id := engine.MsgID{0: byte(l.round >> 16), 1: byte(l.round >> 8), 2: byte(l.round), 3: byte(k >> 8), 4: byte(k), 15: 1}
		body := fmt.Sprint("body ", l.round, " ", k)
		payload := []byte(body)
		if size > 0 {
			payload = make([]byte, size)
		} else {
			l.bodies[id] = body
		}
		ids = append(ids, id)
		c.Messages = append(c.Messages, queuelog.LogMessage{ID: wire.UUID(id), FairnessKey: fmt.Sprint("k", k%3), Weight: 1,
			NotBefore: at, Headers: map[string]string{"body": body}, Payload: payload})
	}
	if err := l.st.Enqueue(&c); err != nil {
		l.t.Fatal(err)
	}
	l.propose()
	return ids
}

// ack commits one entry acking ids.
func (l *snapLeader) ack(ids ...engine.MsgID) {
	l.t.Helper()
	for _, id := range ids {
		if err := l.st.Ack(queuegroup.LaneQueue, id, int64(2000+l.round)); err != nil {
			l.t.Fatal(err)
		}
		delete(l.bodies, id)
	}
	l.propose()
}

// latest opens a store's latest snapshot.
func latest(t *testing.T, snaps raft.SnapshotStore) io.ReadCloser {
	t.Helper()
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	_, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// checkServes checks that a node's state holds exactly the messages of want and its store every
// one's body, and none of gone's.
func checkServes(t *testing.T, st *queuegroup.State, db storage.Store, want map[engine.MsgID]string, gone []engine.MsgID) {
	t.Helper()
	q := st.Lane(queuegroup.LaneQueue)
	if q.Len() != len(want) {
		t.Fatalf("the state holds %d messages, want %d", q.Len(), len(want))
	}
	for id, body := range want {
		if _, ok := q.Get(id); !ok {
			t.Fatalf("message %v is missing", id)
		}
		b, err := db.ReadBody("q", id)
		if err != nil || string(b.Payload) != body || b.Headers["body"] != body {
			t.Fatalf("body of %v: %q %v, %v; want %q", id, b.Payload, b.Headers, err, body)
		}
	}
	for _, id := range gone {
		if _, ok := q.Get(id); ok {
			t.Fatalf("acked %v is back", id)
		}
	}
}

// snapCluster is group "q" on n nodes connected by hashicorp/raft's in-memory transport.
type snapCluster struct {
	nodes []*snapNode
	addrs []raft.ServerAddress
	trans []*raft.InmemTransport
}

func openSnapCluster(t *testing.T, n int) *snapCluster {
	t.Helper()
	c := &snapCluster{nodes: make([]*snapNode, n), addrs: make([]raft.ServerAddress, n), trans: make([]*raft.InmemTransport, n)}
	var peers []raft.Server
	for i := range n {
		c.addrs[i], c.trans[i] = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("node%d", i)))
		peers = append(peers, raft.Server{ID: raft.ServerID(c.addrs[i]), Address: c.addrs[i]})
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			c.connect(i, j)
		}
	}
	for i := range n {
		c.nodes[i] = openSnapNode(t, raftgroup.Config{LocalID: peers[i].ID, Transport: c.trans[i], Peers: peers, HeartbeatTimeout: time.Second})
	}
	return c
}

func (c *snapCluster) connect(i, j int) {
	c.trans[i].Connect(c.addrs[j], c.trans[j])
	c.trans[j].Connect(c.addrs[i], c.trans[i])
}

// leader waits for a node to lead and returns its index.
func (c *snapCluster) leader(t *testing.T) int {
	t.Helper()
	nodes := make([]*testNode, len(c.nodes))
	for i, n := range c.nodes {
		nodes[i] = &testNode{db: n.db, fsm: n.fsm, g: n.g}
	}
	return waitLeader(t, nodes, -1)
}

// A snapshot of a replicated group restores a store that holds nothing of the group: the state
// and every body its messages need, none of acked ones. A node restoring its own snapshot reads
// the state only: a body it lost is not written back.
func TestASnapshotRestoresAFreshStoreWithEveryBody(t *testing.T) {
	c := openSnapCluster(t, 2)
	a := c.nodes[c.leader(t)]
	l := lead(t, a)
	first := l.enqueue(300)
	l.enqueue(200)
	l.ack(first[:100]...)
	if err := a.g.Snapshot(); err != nil {
		t.Fatal(err)
	}
	later := l.enqueue(10) // after the snapshot: in neither its state nor its bodies

	b, err := storage.Open(t.TempDir(), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fsm := newSnapFSM(t, b)
	if err := fsm.Restore(latest(t, a.snaps)); err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(l.bodies)
	for _, id := range later {
		delete(want, id)
		if _, err := b.ReadBody("q", id); err == nil {
			t.Fatalf("the body of %v, enqueued after the snapshot, was restored", id)
		}
	}
	checkServes(t, fsm.state, b, want, first[:100])
	if applied, err := b.Applied("q"); err != nil || applied == 0 || applied != fsm.stored {
		t.Fatalf("the restored store's applied index: %d, %v (state machine: %d)", applied, err, fsm.stored)
	}

	// The node that wrote it restores it without its bodies.
	lost := first[200]
	del := a.db.NewBatch("q")
	del.DeleteBody(lost)
	applied, _ := a.db.Applied("q")
	if err := del.Commit(applied); err != nil {
		t.Fatal(err)
	}
	if err := newSnapFSM(t, a.db).Restore(latest(t, a.snaps)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.db.ReadBody("q", lost); err == nil {
		t.Fatal("restoring its own snapshot wrote the bodies again")
	}
}

// A replica that falls behind a log truncated by a snapshot is brought up by raft's
// InstallSnapshot, and then serves every body: those of the snapshot and those of the log after it.
func TestAReplicaBehindIsBroughtUpByInstallSnapshot(t *testing.T) {
	const n = 3
	c := openSnapCluster(t, n)
	snap := c.nodes
	li := c.leader(t)
	l := lead(t, snap[li])
	first := l.enqueue(50)

	behind := (li + 1) % n
	c.trans[behind].DisconnectAll()
	for i := range n {
		if i != behind {
			c.trans[i].Disconnect(c.addrs[behind])
		}
	}
	var acked []engine.MsgID
	for i := range 100 { // past the entries a snapshot leaves behind it for followers
		ids := l.enqueue(5)
		if i%2 == 0 {
			l.ack(ids[0])
			acked = append(acked, ids[0])
		}
	}
	l.ack(first[:10]...)
	acked = append(acked, first[:10]...)
	if err := snap[li].g.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if first, _ := snap[li].g.Stats(); first <= 2 {
		t.Fatalf("the leader's log still starts at %d", first)
	}
	l.enqueue(7) // after the snapshot: comes to the replica with the log

	for i := range n {
		if i != behind {
			c.connect(i, behind)
		}
	}
	r := snap[behind]
	_, last := snap[li].g.Stats()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.fsm.mu.Lock()
		applied := r.fsm.applied
		r.fsm.mu.Unlock()
		if applied >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica applied up to %d, the leader's log ends at %d", applied, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if metas, err := r.snaps.List(); err != nil || len(metas) == 0 {
		t.Fatalf("the replica was not sent a snapshot: %v", err)
	}
	r.fsm.mu.Lock()
	defer r.fsm.mu.Unlock()
	checkServes(t, r.fsm.state, r.db, l.bodies, acked)
	// The bodies of the messages acked in the log it missed are gone from its store too.
	for _, id := range acked {
		if _, err := r.db.ReadBody("q", id); err == nil {
			t.Fatalf("the replica still holds the body of %v, acked while it was behind", id)
		}
	}
}

// A group of this node alone snapshots its state only: its bodies stay in its store, and no
// other node could be fed the snapshot.
func TestASingleNodeSnapshotsItsStateOnly(t *testing.T) {
	a := openSnapNode(t, raftgroup.Config{})
	l := lead(t, a)
	l.enqueue(10)
	if err := a.g.Snapshot(); err != nil {
		t.Fatal(err)
	}
	r := queuegroup.NewSnapshotReader(latest(t, a.snaps))
	if _, err := r.State("q", "q.dlq"); err != nil {
		t.Fatal(err)
	}
	if _, withBodies, err := r.Bodies(); withBodies || err != nil {
		t.Fatalf("a single node's snapshot: bodies %v, %v", withBodies, err)
	}
}

// slowSnapshots is a store whose queue groups' snapshots are written only once release is
// closed; writing tells writing, once.
type slowSnapshots struct {
	*storage.DB
	writing chan struct{}
	release chan struct{}
}

func (s *slowSnapshots) QueueLog(queue string, bodies storage.EntryBodies) (raftstore.LogStableStore, raft.SnapshotStore, error) {
	logs, snaps, err := s.DB.QueueLog(queue, bodies)
	return logs, slowSnapshotStore{SnapshotStore: snaps, s: s}, err
}

type slowSnapshotStore struct {
	raft.SnapshotStore
	s *slowSnapshots
}

func (st slowSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, c raft.Configuration,
	cIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := st.SnapshotStore.Create(version, index, term, c, cIndex, trans)
	return slowSink{SnapshotSink: sink, s: st.s}, err
}

type slowSink struct {
	raft.SnapshotSink
	s *slowSnapshots
}

func (k slowSink) Write(p []byte) (int, error) {
	select {
	case k.s.writing <- struct{}{}:
	default:
	}
	<-k.s.release
	return k.SnapshotSink.Write(p)
}

// A queue goes on while its snapshot is written: with the snapshot's sink blocked, enqueues,
// peeks (bodies read through the queue) and deletions are answered.
func TestAQueueGoesOnWhileItsSnapshotIsWritten(t *testing.T) {
	live := liveSnapshotMessages
	liveSnapshotMessages = 0 // every snapshot is written in the background
	t.Cleanup(func() { liveSnapshotMessages = live })
	db, err := storage.Open(t.TempDir(), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s := &slowSnapshots{DB: db, writing: make(chan struct{}, 1), release: make(chan struct{})}
	b, err := Open(Options{Store: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	defer b.Close()
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	enqueue := func(payload []byte) {
		t.Helper()
		done := make(chan *Error, 1)
		b.Enqueue([]Message{{Queue: "q", Payload: payload}}, func(_ []EnqueueResult, e *Error) { done <- e })
		if e := <-done; e != nil {
			t.Fatal(e)
		}
	}
	big := make([]byte, 512<<10) // 70 MiB proposed passes the 64 MiB a snapshot waits for
	for started := false; !started; {
		enqueue(big)
		select {
		case <-s.writing:
			started = true
		default:
		}
	}
	// The snapshot is being written, and cannot finish: the queue answers meanwhile.
	for range 20 {
		enqueue([]byte("meanwhile"))
	}
	page, e := b.Peek("q", nil, 1)
	if e != nil || len(page.Messages) != 1 {
		t.Fatalf("peek: %v, %v", page, e)
	}
	if e := b.DeleteMessage("q", page.Messages[0].ID); e != nil {
		t.Fatal(e)
	}
	before, e := b.GetStats("q")
	if e != nil {
		t.Fatal(e)
	}
	enqueue([]byte("meanwhile"))
	after, e := b.GetStats("q")
	if e != nil || after.Depth != before.Depth+1 {
		t.Fatalf("depth %d, then %d after an enqueue (%v)", before.Depth, after.Depth, e)
	}
	close(s.release)
}
