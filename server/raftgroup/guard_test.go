package raftgroup

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// countFSM records the commands applied to it; its snapshots hold nothing.
type countFSM struct {
	mu   sync.Mutex
	cmds []string
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return nil
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return emptySnapshot{}, nil }
func (f *countFSM) Restore(io.ReadCloser) error         { return nil }

type emptySnapshot struct{}

func (emptySnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (emptySnapshot) Release()                             {}

// flakyStore fails the reads of one entry after the first ok of them: with ok 1, raft's restore
// in NewRaft reads it fine, and the next read is raft's own, in its goroutine, where a panic
// kills the process — an entry that became unreadable after the start read it.
type flakyStore struct {
	raftstore.LogStableStore
	mu    sync.Mutex
	index uint64
	ok    int
	reads int
}

func (s *flakyStore) GetLog(index uint64, l *raft.Log) error {
	if index == s.index {
		s.mu.Lock()
		s.reads++
		n := s.reads
		s.mu.Unlock()
		if n > s.ok {
			return errors.New("input/output error")
		}
	}
	return s.LogStableStore.GetLog(index, l)
}

// written opens a group on store, proposes cmds and shuts it down; it returns the entries' indexes.
func written(t *testing.T, cfg Config, cmds ...string) []uint64 {
	t.Helper()
	g, err := Open(cfg, &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown()
	if err := g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	var idx []uint64
	for _, c := range cmds {
		f := g.Propose([]byte(c))
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, f.Index())
	}
	return idx
}

// wantUnreadable fails t unless err names the unreadable entry.
func wantUnreadable(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "cannot be read") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("%s: %v, want the unreadable entry named", what, err)
	}
}

// An entry that cannot be read when the group opens stops the start with an error naming it:
// past the snapshot raft's restore reads it (through the guard), before it Open does.
func TestUnreadableEntryStopsTheOpen(t *testing.T) {
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	cfg := Config{Store: store, Snapshots: snaps, Logger: hclog.NewNullLogger()}
	idx := written(t, cfg, "a", "b", "c")
	fsm := &countFSM{}
	cfg.Store = &flakyStore{LogStableStore: store, index: idx[1]}
	if g, err := Open(cfg, fsm); err == nil {
		g.Shutdown()
		t.Fatal("opened on an unreadable entry past the snapshot")
	} else {
		wantUnreadable(t, "open", err)
	}
	if len(fsm.cmds) != 0 {
		t.Fatalf("applied %v from a log that cannot be read", fsm.cmds)
	}

	// Snapshot the group: the log keeps entries behind the snapshot that raft's restore skips.
	cfg.Store = store
	g, err := Open(cfg, &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := g.Snapshot(); err != nil {
		t.Fatal(err)
	}
	first, _ := g.Stats()
	g.Shutdown()
	cfg.Store = &flakyStore{LogStableStore: store, index: first}
	if g, err := Open(cfg, &countFSM{}); err == nil {
		g.Shutdown()
		t.Fatalf("opened on an unreadable entry %d behind the snapshot", first)
	} else {
		wantUnreadable(t, "open", err)
	}
}

// An entry raft cannot read while it replays stops the group with an error naming it — not the
// process (hashicorp/raft panics in its goroutine) — and nothing at or past it is applied.
func TestUnreadableEntryBreaksTheGroupNotTheProcess(t *testing.T) {
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	cfg := Config{Store: store, Snapshots: snaps, Logger: hclog.NewNullLogger()}
	hole := written(t, cfg, "a", "b", "c")[1]

	cfg.Store = &flakyStore{LogStableStore: store, index: hole, ok: 1}
	fsm := &countFSM{}
	g, err := Open(cfg, fsm)
	if err != nil {
		t.Fatalf("open: %v (raft's restore read the entry fine; its apply's read fails)", err)
	}
	defer g.Shutdown()
	wantUnreadable(t, "Lead", g.Lead(10*time.Second))
	if g.Err() == nil {
		t.Fatal("the group does not report itself broken")
	}
	fsm.mu.Lock()
	defer fsm.mu.Unlock()
	for _, c := range fsm.cmds {
		if c != "a" {
			t.Fatalf("applied %v: an entry at or past the hole", fsm.cmds)
		}
	}
}

// lightStore counts the reads of each entry, light and full; full reads of index bad fail.
type lightStore struct {
	raftstore.LogStableStore
	mu          sync.Mutex
	light, full map[uint64]int
	bad         uint64
}

func (s *lightStore) GetLogLight(index uint64, l *raft.Log) error {
	s.mu.Lock()
	s.light[index]++
	s.mu.Unlock()
	return s.LogStableStore.GetLog(index, l)
}

func (s *lightStore) GetLog(index uint64, l *raft.Log) error {
	s.mu.Lock()
	s.full[index]++
	s.mu.Unlock()
	if index == s.bad {
		return errors.New("input/output error")
	}
	return s.LogStableStore.GetLog(index, l)
}

// A wake reads each entry past the snapshot in full once, to apply it: raft's restore scan reads
// it light, when the store can.
func TestOpenReadsEachEntryInFullOnce(t *testing.T) {
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	cfg := Config{Store: store, Snapshots: snaps, Logger: hclog.NewNullLogger()}
	idx := written(t, cfg, "a", "b", "c", "d")
	ls := &lightStore{LogStableStore: store, light: map[uint64]int{}, full: map[uint64]int{}}
	cfg.Store = ls
	fsm := &countFSM{}
	g, err := Open(cfg, fsm)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	g.Shutdown()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, i := range idx {
		if ls.full[i] != 1 || ls.light[i] == 0 {
			t.Errorf("entry %d: %d full and %d light reads, want one full read after light ones", i, ls.full[i], ls.light[i])
		}
	}
	if len(fsm.cmds) != len(idx) {
		t.Fatalf("applied %v", fsm.cmds)
	}
}

// What a light read leaves out and cannot be read in full breaks the group when it is applied:
// Lead fails naming the entry, and nothing at or past it is applied.
func TestEntryUnreadableInFullBreaksTheGroup(t *testing.T) {
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	cfg := Config{Store: store, Snapshots: snaps, Logger: hclog.NewNullLogger()}
	idx := written(t, cfg, "a", "b", "c")
	cfg.Store = &lightStore{LogStableStore: store, light: map[uint64]int{}, full: map[uint64]int{}, bad: idx[1]}
	fsm := &countFSM{}
	g, err := Open(cfg, fsm)
	if err != nil {
		t.Fatalf("open: %v (the light reads succeed)", err)
	}
	defer g.Shutdown()
	wantUnreadable(t, "Lead", g.Lead(10*time.Second))
	fsm.mu.Lock()
	defer fsm.mu.Unlock()
	for _, c := range fsm.cmds {
		if c != "a" {
			t.Fatalf("applied %v: an entry at or past the hole", fsm.cmds)
		}
	}
}
