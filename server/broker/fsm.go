package broker

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftstore"
	"github.com/filamq/fila/server/storage"
)

// queueFSM is the state machine of one queue group as hashicorp/raft drives it. Its mode follows
// the node's role in the group:
//
//   - following (a replica, or a restart replaying its log, until this node leads): it owns the
//     group's state and applies every committed entry to it;
//   - leading (after take): the actor owns the state and has applied each entry before proposing
//     it, so the state machine only checks that the entry follows the last one applied (its
//     Fence);
//   - back to following (demote, when the node loses the leadership): the state the actor held
//     may run ahead of the log (entries proposed, never committed), so it is dropped and rebuilt
//     from the group's latest snapshot and its log up to the last applied entry.
//
// Either way the bodies of the messages an entry acks are deleted, with the group's applied index
// and no fsync of their own (the bodies themselves were stored by the log store, beside their
// entry): a restart deletes again the bodies of the entries after the stored applied index.
type queueFSM struct {
	db   storage.Store
	name string
	log  *slog.Logger

	state   *queuegroup.State // owned by raft's apply goroutine while following
	leading atomic.Bool
	fence   queuelog.Fence // the last applied entry's, while leading
	stored  uint64         // the applied index stored when the group opened
	applied uint64         // the last entry applied (any mode), under mu
	batch   storage.BodyBatch
	// failed is set when an entry could not be applied. The entry's future carries the error, so
	// the actor reloads the group; until then it takes no snapshot of a state the log lacks.
	failed atomic.Bool
	mu     sync.Mutex        // guards state, applied and the mode across the hand-overs
	live   *queuegroup.State // the actor's state for the next snapshot to write as it is (snapshotLive); under mu

	// What snapshots read (fsmsnapshot.go): the group's stores, its lanes' configurations when
	// it opened, and what the next Snapshot tells it has noted what it is of (under mu).
	logs     raftstore.LogStableStore
	snaps    raft.SnapshotStore
	initial  [2]engine.Config
	captured chan struct{}
	writing  atomic.Bool // a snapshot is being written (checkpoint.go)
	// replicated: the configuration of the snapshot being written has another member, which
	// could be fed it (fsmsnapshot.go)
	replicated atomic.Bool
	// sleepAt is the index of the last applied entry that puts the group to sleep (a Hibernate
	// command: sleepreplicas.go), until the actor takes it; onSleep, when set, is called after
	// such an entry applied (on raft's apply goroutine).
	sleepAt atomic.Uint64
	onSleep func()
	// fates: a deposed leader's proposals waiting for their entries to apply, or not; restored:
	// the last index a snapshot restored (fate.go). Under mu.
	fates    []*fate
	restored uint64
	// fateTally counts the deposed leader's rounds answered by each fate (tests read it).
	fateTally [fateUnknown + 1]atomic.Int64
}

func newQueueFSM(db storage.Store, name string, state *queuegroup.State, log *slog.Logger) (*queueFSM, error) {
	stored, err := db.Applied(name)
	if err != nil {
		return nil, err
	}
	return &queueFSM{db: db, name: name, log: log, state: state, stored: stored, batch: db.NewBatch(name)}, nil
}

// take hands the state to the actor (promotion): from now on the state machine only checks
// fences and deletes acked bodies. The caller has waited for every committed entry to apply.
func (f *queueFSM) take() *queuegroup.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fence = f.state.Fence()
	f.leading.Store(true)
	return f.state
}

// demote takes the state back from a deposed leader: whatever the actor applied beyond the log's
// applied entries is dropped, and the state is built again as of the last applied entry, as a
// snapshot builds it (the latest snapshot's state, then the log: the actor's state is never
// read). Entries go on applying to it from the next one; raft waits for them meanwhile.
func (f *queueFSM) demote() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leading.Load() {
		return nil
	}
	s := &stateSnapshot{f: f, applied: f.applied}
	defer s.Release()
	if err := s.noteBase(); err != nil {
		f.failed.Store(true)
		return err
	}
	st, err := s.build()
	if err != nil {
		f.failed.Store(true)
		return err
	}
	f.state = st
	f.leading.Store(false)
	return nil
}

// errFenced answers an entry that did not follow the last applied one.
var errFenced = errors.New("broker: the queue's log moved on without this entry")

// ApplyBatch applies committed entries, in order, and deletes the bodies they ack in one batch.
func (f *queueFSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	last, sleep := uint64(0), uint64(0)
	f.mu.Lock()
	for i, l := range logs {
		f.applied = max(f.applied, l.Index)
		if l.Type != raft.LogCommand {
			if len(f.fates) > 0 {
				f.decideFates(l)
			}
			continue
		}
		out[i] = f.applyOne(l)
		if len(f.fates) > 0 {
			f.decideFates(l)
		}
		last = l.Index
		if queuegroup.Hibernates(l.Data) {
			sleep = l.Index
		}
	}
	f.mu.Unlock()
	if sleep != 0 {
		f.sleepAt.Store(sleep)
		if f.onSleep != nil {
			defer f.onSleep() // once the entry's bodies are written
		}
	}
	if last > f.stored {
		if err := f.batch.Commit(last); err != nil {
			f.failed.Store(true)
			f.log.Error("writing message bodies failed", "err", err)
			for i := range out {
				if out[i] == nil {
					out[i] = err
				}
			}
		}
	}
	return out
}

// Apply applies one entry (raft uses ApplyBatch; this is for completeness).
func (f *queueFSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *queueFSM) applyOne(l *raft.Log) error {
	if f.leading.Load() {
		next, err := queuegroup.EntryFence(l.Data)
		if err != nil {
			return err
		}
		if !queuegroup.Follows(f.fence, next) {
			f.failed.Store(true)
			return errFenced
		}
		f.fence = next
	} else {
		err := f.state.ApplyEntry(l.Data)
		if errors.Is(err, queuegroup.ErrFenced) {
			return nil // every replica skips it alike
		}
		if err != nil {
			f.log.Error("a log entry does not apply; the queue's state may be incomplete", "index", l.Index, "err", err)
			return err
		}
	}
	if l.Index <= f.stored {
		return nil // its deletions were written before the restart
	}
	return queuegroup.Deleted(l.Data, func(id engine.MsgID) { f.batch.DeleteBody(id) })
}

var (
	_ raft.BatchingFSM = (*queueFSM)(nil)
)
