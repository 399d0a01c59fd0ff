package raftgroup

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// hashicorp/raft panics, in its own goroutine and so for the whole process, when it cannot read
// a log entry it is about to apply. Raft's restore in NewRaft reads every entry past the snapshot
// once, through guardStore, and Open reads the few the snapshot covers (verifyCovered), so a
// damaged store stops the group's start with an error naming the entry; the log is read once
// there, not once more by a separate check. guardStore covers an entry that becomes unreadable
// after that (an I/O error): raft is given a no-op in its place, the group is marked broken, and
// guardFSM refuses every entry from then on, so no state is built past the hole. The broken group
// answers its proposals with the error, Lead fails with it, and the caller stops the group; its
// next Open fails with the same error, naming the entry.

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

// guardStore is the store as raft sees it.
type guardStore struct {
	raftstore.LogStableStore
	b *breaker
}

func (s guardStore) GetLog(index uint64, l *raft.Log) error {
	err := s.LogStableStore.GetLog(index, l)
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
