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

// countFSM records the commands applied to it.
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

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (f *countFSM) Restore(io.ReadCloser) error         { return nil }

// flakyStore fails the reads of one entry after the first two (Verify's, then raft's restore in
// NewRaft, both succeeding): the next read is raft's own, in its goroutine, where a panic kills
// the process — an entry that became unreadable after the start checked it.
type flakyStore struct {
	raftstore.LogStableStore
	mu    sync.Mutex
	index uint64
	reads int
}

func (s *flakyStore) GetLog(index uint64, l *raft.Log) error {
	if index == s.index {
		s.mu.Lock()
		s.reads++
		n := s.reads
		s.mu.Unlock()
		if n > 2 {
			return errors.New("input/output error")
		}
	}
	return s.LogStableStore.GetLog(index, l)
}

// An entry raft cannot read while it replays stops the group with an error naming it — not the
// process (hashicorp/raft panics in its goroutine) — and nothing at or past it is applied.
func TestUnreadableEntryBreaksTheGroupNotTheProcess(t *testing.T) {
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	cfg := Config{Store: store, Snapshots: snaps, Logger: hclog.NewNullLogger()}
	g, err := Open(cfg, &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	var hole uint64
	for _, c := range []string{"a", "b", "c"} {
		f := g.Propose([]byte(c))
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		if c == "b" {
			hole = f.Index()
		}
	}
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}

	cfg.Store = &flakyStore{LogStableStore: store, index: hole}
	fsm := &countFSM{}
	g, err = Open(cfg, fsm)
	if err != nil {
		t.Fatalf("open: %v (Verify read the entry fine; raft's read fails)", err)
	}
	defer g.Shutdown()
	err = g.Lead(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "cannot be read") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("Lead: %v, want the unreadable entry named", err)
	}
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
