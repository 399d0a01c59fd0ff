package broker

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/storage"
)

var (
	snapshotBenchMessages = flag.Int("snapshot-messages", 1_000_000, "stored messages of BenchmarkSnapshotPause's group")
	snapshotBenchPayload  = flag.Int("snapshot-payload", 100, "payload bytes of BenchmarkSnapshotPause's messages")
)

// BenchmarkSnapshotPause measures what a snapshot of a group holding a backlog (-snapshot-messages
// ready messages of -snapshot-payload bytes, on Pebble) costs its queue. pause-ms is the time from asking raft
// for the snapshot until the state machine has noted what it is of: the actor waits that long
// (fila_snapshot_seconds). write-s is the time until the snapshot is written and the log behind
// it truncated, in the background while the queue goes on. old-pause-ms is what the queue paused
// before snapshots were written in the background: writing the live state (no bodies) to a file.
func BenchmarkSnapshotPause(b *testing.B) {
	n := *snapshotBenchMessages
	node := openSnapNode(b, raftgroup.Config{})
	l := lead(b, node)
	for left := n; left > 0; left -= 4096 {
		l.enqueueSized(min(left, 4096), *snapshotBenchPayload)
	}
	var pause, write, old time.Duration
	path := filepath.Join(b.TempDir(), "state")
	for i := 0; i < b.N; i++ {
		l.enqueueSized(1, *snapshotBenchPayload) // something new to snapshot
		start := time.Now()
		captured := make(chan struct{})
		node.fsm.captureOnce(captured)
		done := make(chan error, 1)
		go func() { done <- node.g.Snapshot() }()
		<-captured
		pause += time.Since(start)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		write += time.Since(start)

		start = time.Now()
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.st.WriteSnapshot(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		old += time.Since(start)
	}
	b.ReportMetric(float64(pause.Microseconds())/1e3/float64(b.N), "pause-ms")
	b.ReportMetric(write.Seconds()/float64(b.N), "write-s")
	b.ReportMetric(float64(old.Microseconds())/1e3/float64(b.N), "old-pause-ms")
}

var restartBenchPayload = flag.Int("restart-payload", 1024, "payload bytes of BenchmarkRestartFromOwnSnapshot's messages")

// BenchmarkRestartFromOwnSnapshot measures a restart of a group holding -snapshot-messages
// messages (of -restart-payload bytes) from its own latest snapshot, on Pebble: the group's
// Raft group opened again on its store until the state is back. state-only-s is the restart
// from the snapshot of a group of one node (its state alone); with-bodies-s the same from a
// snapshot that carries the bodies, as a replicated group's does (raft's file store reads it
// whole for its checksum; the bodies are then skipped, since the store holds them). The sizes
// are the snapshots' files.
func BenchmarkRestartFromOwnSnapshot(b *testing.B) {
	n := *snapshotBenchMessages
	db, err := storage.Open(b.TempDir(), storage.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	open := func() (*queueFSM, *raftgroup.Group, raft.SnapshotStore) {
		fsm := newSnapFSM(b, db)
		logs, snaps, err := db.QueueLog("q", queuegroup.Bodies{})
		if err != nil {
			b.Fatal(err)
		}
		g, err := raftgroup.Open(raftgroup.Config{Store: logs, Snapshots: fsm.attach(logs, snaps), Logger: hclog.NewNullLogger()}, fsm)
		if err != nil {
			b.Fatal(err)
		}
		return fsm, g, snaps
	}
	fsm, g, snaps := open()
	l := lead(b, &snapNode{db: db, fsm: fsm, g: g, snaps: snaps})
	for left := n; left > 0; left -= 4096 {
		l.enqueueSized(min(left, 4096), *restartBenchPayload)
	}
	if err := g.Snapshot(); err != nil {
		b.Fatal(err)
	}
	stateOnly := latestSize(b, snaps)
	_ = g.Shutdown()

	restart := func() time.Duration {
		start := time.Now()
		fsm, g, _ := open()
		took := time.Since(start)
		if fsm.state.Lane(queuegroup.LaneQueue).Len() != n {
			b.Fatalf("restarted with %d messages, want %d", fsm.state.Lane(queuegroup.LaneQueue).Len(), n)
		}
		_ = g.Shutdown()
		return took
	}
	var with, without time.Duration
	for i := 0; i < b.N; i++ {
		without += restart()
	}
	// The same snapshot with its bodies, as the latest.
	metas, err := snaps.List()
	if err != nil {
		b.Fatal(err)
	}
	m := metas[0]
	time.Sleep(2 * time.Millisecond) // a later ID (its time in ms) sorts first
	_, trans := raft.NewInmemTransport("")
	sink, err := snaps.Create(m.Version, m.Index, m.Term, m.Configuration, m.ConfigurationIndex, trans)
	if err != nil {
		b.Fatal(err)
	}
	view, err := db.ViewBodies("q")
	if err != nil {
		b.Fatal(err)
	}
	if err := l.st.WriteSnapshot(sink); err != nil {
		b.Fatal(err)
	}
	err = l.st.WriteBodies(sink, m.Index, func(fn queuegroup.BodyFunc) error {
		return view.Each(func(id storage.ID, h map[string]string, p []byte) error { return fn(id, h, p) })
	})
	view.Close()
	if err != nil {
		b.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		b.Fatal(err)
	}
	if latest, _ := snaps.List(); latest[0].ID != sink.ID() {
		b.Fatal("the snapshot with bodies is not the latest")
	}
	for i := 0; i < b.N; i++ {
		with += restart()
	}
	b.ReportMetric(with.Seconds()/float64(b.N), "with-bodies-s")
	b.ReportMetric(without.Seconds()/float64(b.N), "state-only-s")
	b.ReportMetric(float64(latestSize(b, snaps))/(1<<20), "with-bodies-MiB")
	b.ReportMetric(float64(stateOnly)/(1<<20), "state-only-MiB")
}

func latestSize(b *testing.B, snaps raft.SnapshotStore) int64 {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		b.Fatal("no snapshot", err)
	}
	return metas[0].Size
}
