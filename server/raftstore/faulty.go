package raftstore

import (
	"errors"
	"sync"

	"github.com/hashicorp/raft"
)

// ErrInjected is the error a Faulty store returns when told to fail without a particular error.
var ErrInjected = errors.New("raftstore: injected StoreLogs failure")

// LogStableStore is a raft.LogStore that is also its group's raft.StableStore, as Store and
// raft.InmemStore are.
type LogStableStore interface {
	raft.LogStore
	raft.StableStore
}

// Faulty wraps a store for tests and can be told to make StoreLogs (and StoreLog, which raft's
// BootstrapCluster uses) fail, to see what the broker does when a commit fails. Every other
// method passes straight through. It is safe for concurrent use.
//
// Two kinds of failure: FailNext and FailAll return the error before calling the wrapped store,
// so nothing is written (a clean failure); FailNextAfterStoring stores the entries and then
// reports the error, as a real Pebble commit whose WAL fsync fails does: Pebble has already
// applied the batch to its memtable, so the entries are readable although the commit failed,
// and the WAL writer keeps the error, so every later synced commit fails too (pebble
// commit.go Commit, record/log_writer.go flushLoop).
//
// On a leader, hashicorp/raft answers every future of the failed batch with the returned error
// and steps down to follower (raft.go dispatchLogs); a single node elects itself again after a
// heartbeat timeout and writes its next entries over the failed indexes.
type Faulty struct {
	LogStableStore

	mu         sync.Mutex
	failNext   int   // calls still to fail; -1 fails every call until Clear
	afterStore bool  // store the entries before failing
	err        error // the error to return
	failed     int   // calls failed so far
}

var (
	_ raft.LogStore    = (*Faulty)(nil)
	_ raft.StableStore = (*Faulty)(nil)
)

// NewFaulty wraps s; it fails nothing until told to.
func NewFaulty(s LogStableStore) *Faulty { return &Faulty{LogStableStore: s} }

// FailNext makes the next n StoreLogs calls fail with err (ErrInjected when nil) without
// writing anything, replacing any earlier instruction. n <= 0 is Clear.
func (f *Faulty) FailNext(n int, err error) { f.set(max(n, 0), false, err) }

// FailNextAfterStoring makes the next n StoreLogs calls store their entries and then return err
// (ErrInjected when nil), replacing any earlier instruction. n <= 0 is Clear.
func (f *Faulty) FailNextAfterStoring(n int, err error) { f.set(max(n, 0), true, err) }

// FailAll makes every StoreLogs call fail with err (ErrInjected when nil) without writing
// anything, until Clear.
func (f *Faulty) FailAll(err error) { f.set(-1, false, err) }

// Clear stops injecting failures.
func (f *Faulty) Clear() { f.set(0, false, nil) }

// Failed returns how many calls have been failed so far.
func (f *Faulty) Failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *Faulty) set(n int, afterStore bool, err error) {
	if err == nil {
		err = ErrInjected
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext, f.afterStore, f.err = n, afterStore, err
}

// StoreLog fails like StoreLogs, or stores l.
func (f *Faulty) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores logs in the wrapped store, or fails as instructed.
func (f *Faulty) StoreLogs(logs []*raft.Log) error {
	afterStore, err := f.injected()
	if err == nil || afterStore {
		if serr := f.LogStableStore.StoreLogs(logs); serr != nil {
			return serr
		}
	}
	return err
}

// injected consumes one injected failure, if one is due.
func (f *Faulty) injected() (afterStore bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext == 0 {
		return false, nil
	}
	if f.failNext > 0 {
		f.failNext--
	}
	f.failed++
	return f.afterStore, f.err
}
