package raftgroup

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// hashicorp/raft panics, in its own goroutine and so for the whole process, when it cannot read
// a log entry it is about to apply. Raft's restore in NewRaft reads every entry past the snapshot
// once (light reads, LightReader), through guardStore, and Open reads the few the snapshot
// covers (verifyCovered), so a damaged log stops the group's start with an error naming the
// entry, without a separate pass over the log. guardStore covers an entry that cannot be read
// when it is applied (what a light read leaves out, such as a message body, or an I/O error
// since): raft is given a no-op in its place, the group is marked broken, and
// guardFSM refuses every entry from then on, so no state is built past the hole. The broken group
// answers its proposals with the error, Lead fails with it, and the caller stops the group; its
// next start fails with the same error, naming the entry (in Open, or in Lead for what a light
// read leaves out).

// breaker holds a group's first read failure.
type breaker struct {
	mu  sync.Mutex
	err error
}

func (b *breaker) broke(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

func (b *breaker) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// LightReader is the optional ability of a log store to read an entry more cheaply when only its
// Index, Term and Type matter, and the Data of entries other than commands (storage's queue log
// then leaves out the message bodies it keeps beside a command's entry). Raft's restore in Open
// scans the log for configuration entries with it; the entries it applies are read in full.
type LightReader interface {
	GetLogLight(index uint64, l *raft.Log) error
}

// guardStore is the store as raft sees it.
type guardStore struct {
	raftstore.LogStableStore
	b     *breaker
	lr    LightReader  // the store's, nil if it has none
	light *atomic.Bool // reads go through lr, if the store has it (raft's restore scan)
}

func newGuardStore(store raftstore.LogStableStore, b *breaker) guardStore {
	lr, _ := store.(LightReader)
	return guardStore{LogStableStore: store, b: b, lr: lr, light: &atomic.Bool{}}
}

func (s guardStore) GetLog(index uint64, l *raft.Log) error {
	var err error
	if s.lr != nil && s.light.Load() {
		err = s.lr.GetLogLight(index, l)
	} else {
		err = s.LogStableStore.GetLog(index, l)
	}
	if err == nil || errors.Is(err, raft.ErrLogNotFound) {
		return err
	}
	s.b.broke(fmt.Errorf("raftgroup: log entry %d cannot be read: %w", index, err))
	*l = raft.Log{Index: index, Type: raft.LogNoop}
	return nil
}

// guardFSM is the state machine as raft sees it: it refuses every entry once the group broke.
type guardFSM struct {
	fsm raft.FSM
	b   *breaker
}

var _ raft.BatchingFSM = guardFSM{}

func (f guardFSM) Apply(l *raft.Log) any {
	if err := f.b.failure(); err != nil {
		return err
	}
	return f.fsm.Apply(l)
}

func (f guardFSM) ApplyBatch(logs []*raft.Log) []any {
	if err := f.b.failure(); err != nil {
		out := make([]any, len(logs))
		for i := range out {
			out[i] = err
		}
		return out
	}
	if bf, ok := f.fsm.(raft.BatchingFSM); ok {
		return bf.ApplyBatch(logs)
	}
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.fsm.Apply(l)
		}
	}
	return out
}

func (f guardFSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.b.failure(); err != nil {
		return nil, err
	}
	return f.fsm.Snapshot()
}

func (f guardFSM) Restore(rc io.ReadCloser) error { return f.fsm.Restore(rc) }
