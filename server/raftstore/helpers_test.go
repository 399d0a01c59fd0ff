package raftstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// openDB opens (creating if needed) a Pebble database in dir and closes it when the test ends,
// unless the test closed it first with closeDB.
func openDB(tb testing.TB, dir string) *pebble.DB {
	tb.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if _, done := closedDBs.LoadOrStore(db, true); !done {
			_ = db.Close()
		}
	})
	return db
}

// closedDBs holds the databases closeDB closed (pebble.DB.Close panics when called twice).
var closedDBs sync.Map

func closeDB(tb testing.TB, db *pebble.DB) {
	tb.Helper()
	closedDBs.Store(db, true)
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func newStore(tb testing.TB, db *pebble.DB, prefix string) *Store {
	tb.Helper()
	s, err := New(Pebble(db), []byte(prefix), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func checkBounds(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("bounds %d..%d, want %d..%d", f, l, first, last)
	}
}

// entries returns command entries lo..hi of term 1 whose data is the index.
func entries(lo, hi uint64) []*raft.Log {
	var out []*raft.Log
	for i := lo; i <= hi; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand,
			Data: binary.BigEndian.AppendUint64(nil, i)})
	}
	return out
}

// countingFSM records every command it applies (8-byte big-endian numbers) in order. Its
// snapshot is the whole list.
type countingFSM struct {
	mu      sync.Mutex
	seen    []uint64
	applies int // Apply calls since creation (not counting a restore)
}

func (f *countingFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, binary.BigEndian.Uint64(l.Data))
	f.applies++
	return len(f.seen)
}

func (f *countingFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fsmSnapshot(append([]uint64(nil), f.seen...)), nil
}

func (f *countingFSM) Restore(r io.ReadCloser) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	var seen []uint64
	for ; len(b) >= 8; b = b[8:] {
		seen = append(seen, binary.BigEndian.Uint64(b))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = seen
	return nil
}

func (f *countingFSM) state() (seen []uint64, applies int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.seen...), f.applies
}

type fsmSnapshot []uint64

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var b []byte
	for _, v := range s {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}

// fastConfig is a single-node configuration with short timeouts, so that tests elect quickly.
func fastConfig(id string) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.LogOutput = io.Discard
	c.LogLevel = "ERROR"
	return c
}

// node is one single-node raft group on a Store.
type node struct {
	raft  *raft.Raft
	fsm   *countingFSM
	trans *raft.InmemTransport
}

// startNode starts raft for the group on logs (bootstrapping it when it has no state) and
// waits until it leads.
func startNode(tb testing.TB, conf *raft.Config, logs LogStableStore, snaps raft.SnapshotStore) *node {
	tb.Helper()
	n := launchNode(tb, conf, logs, snaps)
	waitLeader(tb, n.raft, 10*time.Second)
	return n
}

// launchNode is startNode without the wait.
func launchNode(tb testing.TB, conf *raft.Config, logs LogStableStore, snaps raft.SnapshotStore) *node {
	tb.Helper()
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(conf.LocalID))
	n := &node{fsm: &countingFSM{}, trans: trans}
	hasState, err := raft.HasExistingState(logs, logs, snaps)
	if err != nil {
		tb.Fatal(err)
	}
	if !hasState {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}
		if err := raft.BootstrapCluster(conf, logs, logs, snaps, trans, cfg); err != nil {
			tb.Fatal(err)
		}
	}
	n.raft, err = raft.NewRaft(conf, n.fsm, logs, logs, snaps, trans)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func waitLeader(tb testing.TB, r *raft.Raft, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for r.State() != raft.Leader {
		if time.Now().After(deadline) {
			tb.Fatalf("no leader after %v (state %v)", within, r.State())
		}
		time.Sleep(time.Millisecond)
	}
}

func (n *node) stop(tb testing.TB) {
	tb.Helper()
	if err := n.raft.Shutdown().Error(); err != nil {
		tb.Fatal(err)
	}
}
