package storage

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// Store is everything the broker keeps durably: the Raft log, stable store and snapshots of each
// group, and the bodies of each queue group. DB (Pebble and files) is the production Store; Mem
// is its in-memory twin for tests, which can fail commits and lose unsynced writes on command.
type Store interface {
	// MetaLog and QueueLog return a group's log and stable store and its snapshot store. A
	// queue group's log store keeps each message body once, beside the entry that carries it:
	// bodies finds them in the entries (it must not be nil).
	MetaLog() (raftstore.LogStableStore, raft.SnapshotStore, error)
	QueueLog(queue string, bodies EntryBodies) (raftstore.LogStableStore, raft.SnapshotStore, error)
	// NewBatch starts the body deletions of applied log entries of a queue group. (A body is
	// written by the group's log store, beside the entry that carries it.)
	NewBatch(queue string) BodyBatch
	// Applied returns the last log index whose bodies a queue group has written (0 if none).
	Applied(queue string) (uint64, error)
	// ReadBody returns a body, copied out of the store; ErrNotFound when there is none.
	ReadBody(queue string, id ID) (Body, error)
	// ReadBodiesLater takes a consistent view of the store now and returns read, which reads the
	// bodies of ids (sorted ascending) as they were then, skipping those with none; fn's payload
	// is valid during the call. read may run on another goroutine and must be called exactly once.
	ReadBodiesLater(queue string, ids []ID) (read func(fn func(i int, headers map[string]string, payload []byte)) error)
	// Queues lists the queue groups that have stored state.
	Queues() ([]string, error)
	// DropQueue deletes a stopped queue group's log, snapshots and bodies, durably.
	DropQueue(queue string) error
	// Health reports whether the store accepts writes. After a failed write it refuses every
	// write (with a *WriteError) until it has recovered by itself; reads go on meanwhile.
	Health() Health
	Close() error
}

// BodyBatch collects body deletions that become visible together with their applied index.
type BodyBatch interface {
	DeleteBody(id ID)
	// Commit writes the batch and the applied index without an fsync of its own, then resets
	// the batch for reuse.
	Commit(applied uint64) error
	Close()
}

var (
	_ Store     = (*DB)(nil)
	_ BodyBatch = (*Batch)(nil)
)

// MetaLog returns the meta group's log store (in Pebble) and snapshot store (files).
func (d *DB) MetaLog() (raftstore.LogStableStore, raft.SnapshotStore, error) {
	logs, snaps, err := d.groupLog(metaRaftPrefix(), filepath.Join(d.dir, snapshotsDir, "meta"))
	if err != nil {
		return nil, nil, err
	}
	return gatedLog{Store: logs, gate: &d.snapGate}, snaps, nil
}

// QueueLog returns a queue group's log store (in Pebble, each body that bodies finds stored once
// beside the entries: see bodyLog) and snapshot store (files).
func (d *DB) QueueLog(queue string, bodies EntryBodies) (raftstore.LogStableStore, raft.SnapshotStore, error) {
	if bodies == nil {
		return nil, nil, errNoEntryBodies
	}
	if err := d.dropStaleSnapshots(queue); err != nil {
		return nil, nil, err
	}
	logs, snaps, err := d.groupLog(queueRaftPrefix(queue), d.snapshotDir(queue))
	if err != nil {
		return nil, nil, err
	}
	return &bodyLog{Store: logs, db: d, queue: queue, bodies: bodies}, snaps, nil
}

func (d *DB) groupLog(prefix []byte, snapDir string) (*raftstore.Store, raft.SnapshotStore, error) {
	logs, err := raftstore.New(d, prefix, raftstore.Options{NoSync: d.noSync})
	if err != nil {
		return nil, nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(snapDir, 2, hclog.NewNullLogger())
	if err != nil {
		return nil, nil, fmt.Errorf("storage: snapshots in %s: %w", snapDir, err)
	}
	return logs, gatedSnapshots{SnapshotStore: snaps, gate: &d.snapGate}, nil
}

// snapshotDir is where a queue group keeps its snapshots: names are hex-encoded, so that any
// queue name makes one directory; a name too long for that (its hex would pass the 255 bytes of
// a file name) is named by its SHA-256 instead.
func (d *DB) snapshotDir(queue string) string {
	name := fmt.Sprintf("q%x", queue)
	if len(queue) > maxHexName {
		name = fmt.Sprintf("h%x", sha256.Sum256([]byte(queue)))
	}
	return filepath.Join(d.dir, snapshotsDir, name)
}

// maxHexName is the longest queue name whose directory name, "q" and its hex, fits 255 bytes.
const maxHexName = 127

// removeSnapshots removes a group's snapshot directory, durably (its parent is synced).
func removeSnapshots(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	parent, err := os.Open(filepath.Dir(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer parent.Close()
	return parent.Sync()
}

// dropStaleSnapshots removes the snapshots of a queue group that has no key in the store: they
// are left from a deleted queue of the same name (DropQueue removes the snapshots before the
// log, but a store written before it did so may hold some), and raft would restore the deleted
// queue from them. A group with a snapshot always has keys: its term, stored before any entry.
func (d *DB) dropStaleSnapshots(queue string) error {
	dir := d.snapshotDir(queue)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	lo := queueRaftPrefix(queue)
	hi := append(bytes.Clone(lo[:len(lo)-1]), 1)
	var empty bool
	if err := d.Read(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		empty = !it.First()
		return it.Close()
	}); err != nil || !empty {
		return err
	}
	d.log.Warn("storage: removing the snapshots of a deleted queue left beside no log", "queue", queue, "dir", dir)
	d.snapGate.RLock()
	defer d.snapGate.RUnlock()
	return removeSnapshots(dir)
}
