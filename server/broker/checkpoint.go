package broker

import (
	"errors"
	"path/filepath"
)

// snapshot has raft snapshot the group and returns once the state machine has noted what the
// snapshot is of (fsmsnapshot.go): raft writes it, and truncates the log behind it, in the
// background while the actor goes on. The caller has drained the rounds in flight, so the state
// noted is the actor's, and checks writing first: raft takes one snapshot at a time, and a
// second request would wait for the first to be written.
func (a *actor) snapshot() error {
	if a.snapshotsLive() {
		return a.snapshotLive()
	}
	g, fsm, log := a.g, a.fsm, a.log
	captured := make(chan struct{})
	fsm.captureOnce(captured)
	fsm.writing.Store(true)
	done := make(chan error, 1)
	go func() {
		err := g.Snapshot()
		fsm.writing.Store(false)
		select {
		case <-captured:
			if err != nil { // the actor has gone on: nobody else hears of it
				log.Error("writing a snapshot failed", "err", err)
			}
		default:
		}
		done <- err
	}()
	select {
	case <-captured:
		return nil
	case err := <-done:
		fsm.captureOnce(nil)
		return err
	}
}

// liveSnapshotMessages bounds the messages of a group whose snapshot writes the actor's state as
// it is while the actor waits (snapshotLive): writing 100,000 messages' state takes about 17 ms
// here, less than building a state from the log costs in CPU — which a group that snapshots often
// (a short queue with much traffic) would otherwise pay for every entry it applies twice. A
// variable so that tests can lower it.
var liveSnapshotMessages = 100_000

// snapshotsLive reports whether the group's next snapshot is written from the actor's state: a
// small state of a group of this node alone (a replicated group's snapshot carries every body,
// whose writing would stop the queue for longer).
func (a *actor) snapshotsLive() bool {
	return len(a.replicas) <= 1 && a.st.Lane(0).Len()+a.st.Lane(1).Len() <= liveSnapshotMessages
}

// snapshotLive has raft snapshot the group from the actor's state and waits until it is written:
// the caller has drained the rounds in flight, so the state is the applied one, and nothing
// changes it until the snapshot is written.
func (a *actor) snapshotLive() error {
	a.fsm.mu.Lock()
	a.fsm.live = a.st
	a.fsm.mu.Unlock()
	err := a.g.Snapshot()
	a.fsm.mu.Lock()
	a.fsm.live = nil // not taken when raft had nothing new to snapshot
	a.fsm.mu.Unlock()
	return err
}

// checkpointer is a store that can copy itself as of one moment (storage.DB.Checkpoint).
type checkpointer interface {
	Checkpoint(dir string) error
}

// ErrNoCheckpoint is what Checkpoint returns for a store that cannot copy itself (a test's
// in-memory store).
var ErrNoCheckpoint = errors.New("broker: this store cannot be checkpointed")

// Checkpoint writes a copy of the broker's durable state into dir, which must not exist: the
// store as of one moment (storage.DB.Checkpoint: every write committed before the call, so every
// request answered before it), and the throttles' file as a crash would leave it (present and
// empty when throttles were declared here: the node started on the copy starts every bucket full
// for its throttle's largest window). Requests go on meanwhile.
func (b *Broker) Checkpoint(dir string) error {
	cp, ok := b.db.(checkpointer)
	if !ok {
		return ErrNoCheckpoint
	}
	if err := cp.Checkpoint(dir); err != nil {
		return err
	}
	st := &b.throttleFile
	st.mu.Lock()
	present := st.present
	st.mu.Unlock()
	if !present {
		return nil
	}
	return writeSynced(filepath.Join(dir, throttleFile), nil)
}
