package broker

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/raftstore"
	"github.com/filamq/fila/server/storage"
)

// A queue group's snapshot is its state as of the last applied entry, followed by the body of
// every message it holds (queuegroup's snapshot format), so that it alone restores a replica
// that holds nothing of the group, as raft's InstallSnapshot does. Only a group with another
// member has such a replica: a group of this node alone snapshots its state only, its bodies
// staying in its store (writing every stored body again with each snapshot cost a backlog of
// 1 KB messages a third of its throughput). A member added to such a group later is fed the log,
// or a snapshot taken since it joined.
//
// Taking one does not stop the queue for longer than it takes to note what it is of. Snapshot,
// on raft's apply goroutine, only notes the last applied index, the group's latest snapshot and
// a view of the store's bodies as of that index; Persist, on raft's snapshot goroutine while
// entries go on applying, builds the state as of that index by itself — the latest snapshot's
// state, then the log up to the index, as a restart would — and writes it with the bodies the
// view holds for its messages. The live state (the actor's, or the one the apply goroutine
// changes) is never read: building costs a second copy of the state for the time of the
// snapshot, and the apply work of the log since the last one, off the queue's goroutine.

// attach gives the state machine its group's log and snapshot stores, which its snapshots read,
// before raft restores anything into it. It returns the snapshot store raft is to use: snaps,
// telling the state machine the configuration of each snapshot raft creates.
func (f *queueFSM) attach(logs raftstore.LogStableStore, snaps raft.SnapshotStore) raft.SnapshotStore {
	f.logs, f.snaps = logs, snaps
	f.initial = [2]engine.Config{f.state.Lane(queuegroup.LaneQueue).Config(), f.state.Lane(queuegroup.LaneDeadLetter).Config()}
	return configSnapshots{SnapshotStore: snaps, f: f}
}

// configSnapshots is a group's snapshot store as raft sees it: Create, which raft calls between
// the state machine's Snapshot and Persist, notes the snapshot's configuration.
type configSnapshots struct {
	raft.SnapshotStore
	f *queueFSM
}

func (s configSnapshots) Create(version raft.SnapshotVersion, index, term uint64, c raft.Configuration,
	cIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	s.f.replicated.Store(len(c.Servers) > 1)
	return s.SnapshotStore.Create(version, index, term, c, cIndex, trans)
}

// captureOnce has the next Snapshot close c once it has noted what the snapshot is of.
func (f *queueFSM) captureOnce(c chan struct{}) {
	f.mu.Lock()
	f.captured = c
	f.mu.Unlock()
}

// Snapshot notes what the snapshot is of (see above); it runs on raft's apply goroutine, so no
// entry applies meanwhile.
func (f *queueFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	applied := f.applied
	captured := f.captured
	f.captured = nil
	live := f.live
	f.live = nil
	f.mu.Unlock()
	if captured != nil {
		defer close(captured)
	}
	if f.logs == nil {
		return nil, errors.New("broker: the queue's state machine has no stores")
	}
	s := &stateSnapshot{f: f, applied: applied, live: live}
	if err := s.noteBase(); err != nil {
		return nil, err
	}
	if sb, ok := f.db.(storage.SnapshotBodies); ok {
		view, err := sb.ViewBodies(f.name)
		if err != nil {
			s.Release()
			return nil, err
		}
		s.view = view
	}
	return s, nil
}

// Restore replaces the state with a snapshot's (at start-up, before any entry, or on raft's
// InstallSnapshot). The snapshot's bodies replace the group's in the store when the store has
// not applied the snapshot's index yet (a replica fed by another node); a node restoring its own
// snapshot has them already and reads the state only.
func (f *queueFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	r := queuegroup.NewSnapshotReader(rc)
	r.Alloc = f.initial[queuegroup.LaneQueue].Alloc
	s, err := r.State(f.name, f.name+dlqSuffix)
	if err != nil {
		return fmt.Errorf("queue %q: %w", f.name, err)
	}
	applied, withBodies, err := r.Bodies()
	if err != nil {
		return fmt.Errorf("queue %q: %w", f.name, err)
	}
	if withBodies {
		if err := f.restoreBodies(r, s, applied); err != nil {
			return fmt.Errorf("queue %q: %w", f.name, err)
		}
	}
	f.mu.Lock()
	f.state = s
	if withBodies {
		f.applied = max(f.applied, applied)
		f.stored = max(f.stored, applied)
	}
	f.restoredFates(applied, withBodies)
	f.mu.Unlock()
	return nil
}

// restoreBodies writes a snapshot's bodies unless the store has applied its index already, and
// then drops the bodies the group held that neither the snapshot's state nor the log after it
// needs (those of messages acked in the part of the log this node missed).
func (f *queueFSM) restoreBodies(r *queuegroup.SnapshotReader, s *queuegroup.State, applied uint64) error {
	have, err := f.db.Applied(f.name)
	if err != nil {
		return err
	}
	sb, ok := f.db.(storage.SnapshotBodies)
	if have >= applied || !ok {
		return nil
	}
	w := sb.RestoreBodies(f.name)
	if err := r.EachBody(func(id engine.MsgID, h map[string]string, p []byte) error { return w.Put(id, h, p) }); err != nil {
		return err
	}
	if err := w.Commit(applied); err != nil {
		return err
	}
	return f.dropStaleBodies(sb, s, applied)
}

// dropStaleBodies deletes the group's bodies of messages that s, the state as of applied, does
// not hold and that no entry of the local log after applied enqueues.
func (f *queueFSM) dropStaleBodies(sb storage.SnapshotBodies, s *queuegroup.State, applied uint64) error {
	keep := map[storage.ID]bool{}
	if f.logs != nil {
		last, err := f.logs.LastIndex()
		if err != nil {
			return err
		}
		light, _ := f.logs.(raftgroup.LightReader)
		var l raft.Log
		var ids [][16]byte
		for i := applied + 1; i <= last; i++ {
			if light != nil {
				err = light.GetLogLight(i, &l)
			} else {
				err = f.logs.GetLog(i, &l)
			}
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if l.Type != raft.LogCommand {
				continue
			}
			if ids, err = (queuegroup.Bodies{}).IDs(l.Data, ids[:0]); err != nil {
				return err
			}
			for _, id := range ids {
				keep[id] = true
			}
		}
	}
	view, err := sb.ViewBodies(f.name)
	if err != nil {
		return err
	}
	defer view.Close()
	del := f.db.NewBatch(f.name)
	defer del.Close()
	err = view.Each(func(id storage.ID, _ map[string]string, _ []byte) error {
		if !keep[id] && !holds(s, id) {
			del.DeleteBody(id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return del.Commit(applied)
}

// holds reports whether either lane of s stores message id.
func holds(s *queuegroup.State, id engine.MsgID) bool {
	if _, ok := s.Lane(queuegroup.LaneQueue).Get(id); ok {
		return true
	}
	_, ok := s.Lane(queuegroup.LaneDeadLetter).Get(id)
	return ok
}

// stateSnapshot is a snapshot noted by Snapshot and written by Persist.
type stateSnapshot struct {
	f       *queueFSM
	applied uint64            // the last entry the snapshot includes
	base    raft.SnapshotMeta // the group's latest snapshot (Index 0: none)
	baseRC  io.ReadCloser     // base, opened already when the store keeps no more than one
	view    storage.BodyView  // the bodies as of applied; nil for a store without views
	// live is the actor's state, written as it is, when the actor waits for the snapshot to be
	// written (snapshotLive); nil: the snapshot builds its own from the log.
	live *queuegroup.State
}

// noteBase notes the group's latest snapshot. A store that keeps only its latest replaces it as
// soon as raft creates the next (raft's in-memory store): its snapshot is opened now.
func (s *stateSnapshot) noteBase() error {
	metas, err := s.f.snaps.List()
	if err != nil || len(metas) == 0 {
		return err
	}
	s.base = *metas[0]
	if _, one := s.f.snaps.(*raft.InmemSnapshotStore); one {
		_, s.baseRC, err = s.f.snaps.Open(s.base.ID)
	}
	return err
}

func (s *stateSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.write(sink)
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("queue %q: snapshot: %w", s.f.name, err)
	}
	return sink.Close()
}

func (s *stateSnapshot) write(w io.Writer) error {
	st := s.live
	if st == nil {
		built, err := s.build()
		if err != nil {
			return err
		}
		defer built.Release() // nothing else has it
		st = built
	}
	if err := st.WriteSnapshot(w); err != nil {
		return err
	}
	if s.view == nil || !s.f.replicated.Load() {
		return nil // the Pebble snapshot is released with the snapshot
	}
	return st.WriteBodies(w, s.applied, func(fn queuegroup.BodyFunc) error {
		return s.view.Each(func(id storage.ID, h map[string]string, p []byte) error { return fn(id, h, p) })
	})
}

// build makes the group's state as of s.applied: the base snapshot's state (the empty state
// without one), then every command entry after it up to s.applied, as a restart replays them.
func (s *stateSnapshot) build() (*queuegroup.State, error) {
	f := s.f
	st, err := s.baseState()
	if err != nil {
		return nil, err
	}
	light, _ := f.logs.(raftgroup.LightReader)
	var l raft.Log
	for i := s.base.Index + 1; i <= s.applied; i++ {
		if light != nil {
			err = light.GetLogLight(i, &l)
		} else {
			err = f.logs.GetLog(i, &l)
		}
		if err != nil {
			return nil, fmt.Errorf("log entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		// As the state machine applies the log: an entry fenced off is skipped by every replica,
		// and one that does not apply was logged when it was applied.
		if err := st.ApplyEntry(l.Data); err != nil && !errors.Is(err, queuegroup.ErrFenced) {
			f.log.Warn("a log entry does not apply to the snapshot's state", "index", i, "err", err)
		}
	}
	return st, nil
}

func (s *stateSnapshot) baseState() (*queuegroup.State, error) {
	f := s.f
	if s.base.Index == 0 {
		return queuegroup.New(f.name, f.name+dlqSuffix, f.initial[0], f.initial[1])
	}
	rc := s.baseRC
	s.baseRC = nil
	if rc == nil {
		var err error
		if _, rc, err = f.snaps.Open(s.base.ID); err != nil {
			return nil, fmt.Errorf("the latest snapshot: %w", err)
		}
	}
	defer rc.Close()
	r := queuegroup.NewSnapshotReader(rc)
	r.Alloc = f.initial[queuegroup.LaneQueue].Alloc
	st, err := r.State(f.name, f.name+dlqSuffix)
	if err != nil {
		return nil, fmt.Errorf("the latest snapshot: %w", err)
	}
	return st, nil
}

func (s *stateSnapshot) Release() {
	if s.view != nil {
		s.view.Close()
	}
	if s.baseRC != nil {
		_ = s.baseRC.Close()
		s.baseRC = nil
	}
}
