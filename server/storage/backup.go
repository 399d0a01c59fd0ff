package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// Checkpoints. The store is two things that must agree: the Pebble database (every group's Raft
// log and stable store, and the bodies) and the groups' Raft snapshots, files under snapshots/.
// A start restores each group from its newest snapshot and replays the log entries after it, so a
// copy of the two is sound when it holds, for every group, a snapshot and the log entries that
// follow it. Raft changes that pair in two steps: it writes a new snapshot (the sink's Close
// renames it into place and removes the older ones), then deletes the log entries the snapshot
// covers (DeleteRange). Pebble's checkpoint copies the database as of one moment; the snapshots
// are copied beside it while the snapshot gate is held exclusively, and both steps, like a queue's
// deletion, take the gate shared. So the copy is what a crash at that moment would have left:
// a start on it recovers as it does after a crash, with every write committed before Checkpoint
// was called. Writes to the database go on meanwhile; only a group that finishes a snapshot
// waits, for the length of the copy, which is made in the store's own directory (links, and a
// copy of the WALs) before it moves to its destination.

// snapshotsDir is the directory of every group's snapshots in a store's directory.
const snapshotsDir = "snapshots"

// stagingPrefix names the directories in the store's directory where checkpoints are made before
// they move to their destination; Open removes any that a crash left.
const stagingPrefix = ".checkpoint-"

// Checkpoint writes a copy of the store into dir, which must not exist; its parent is created
// if needed. The copy is a data directory a server can start on. It is made in the store's own
// directory first (stagingPrefix), where Pebble's immutable files and the snapshots are
// hard-linked and only the WALs copied, so the gate is held for that alone (milliseconds); the
// WALs are cut after their last complete record (trimWALs), and the copy is then renamed to dir,
// or copied there when dir is on another file system. A store that refuses writes is not copied:
// Checkpoint returns its *WriteError.
func (d *DB) Checkpoint(dir string) error {
	if err := d.h.err(); err != nil {
		return err
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			err = fs.ErrExist
		}
		return fmt.Errorf("storage: checkpoint into %s: %w", dir, err)
	}
	stage, err := os.MkdirTemp(d.dir, stagingPrefix+"*")
	if err != nil {
		return fmt.Errorf("storage: checkpoint: %w", err)
	}
	defer os.RemoveAll(stage)
	src := filepath.Join(stage, "store")
	err = d.checkpoint(src)
	if err == nil {
		err = trimWALs(src)
	}
	if err == nil {
		err = moveTree(src, dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("storage: checkpoint into %s: %w", dir, err)
	}
	return nil
}

// moveTree moves the directory src to dst (which must not exist): a rename on one file system,
// else a synced copy.
func moveTree(src, dst string) error {
	parent := filepath.Dir(filepath.Clean(dst))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		if err := LinkTree(src, dst, nil); err != nil {
			return err
		}
	}
	return errors.Join(syncDir(dst), syncDir(parent))
}

// removeStaging removes the checkpoint staging directories in dir that a crash left.
func removeStaging(dir string) error {
	left, err := filepath.Glob(filepath.Join(dir, stagingPrefix+"*"))
	for _, path := range left {
		err = errors.Join(err, os.RemoveAll(path))
	}
	return err
}

// checkpoint copies the database and the snapshots with the snapshot gate held.
func (d *DB) checkpoint(dir string) error {
	d.snapGate.Lock()
	defer d.snapGate.Unlock()
	if err := d.Read(func(p *pebble.DB) error { return p.Checkpoint(dir, pebble.WithFlushedWAL()) }); err != nil {
		return err
	}
	return LinkTree(filepath.Join(d.dir, snapshotsDir), filepath.Join(dir, snapshotsDir), isSnapshotInProgress)
}

// isSnapshotInProgress reports whether a snapshot directory entry is one raft is still writing
// (raft's file snapshot store names it <id>.tmp until its sink is closed).
func isSnapshotInProgress(name string) bool { return strings.HasSuffix(name, ".tmp") }

// gatedSnapshots is a group's snapshot store whose sinks close (rename the new snapshot into
// place, remove the old ones) under the snapshot gate, taken shared.
type gatedSnapshots struct {
	raft.SnapshotStore
	gate *sync.RWMutex
}

func (s gatedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, c raft.Configuration,
	cIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, c, cIndex, trans)
	if err != nil {
		return nil, err
	}
	return gatedSink{SnapshotSink: sink, gate: s.gate}, nil
}

type gatedSink struct {
	raft.SnapshotSink
	gate *sync.RWMutex
}

func (s gatedSink) Close() error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	return s.SnapshotSink.Close()
}

// gatedLog is the meta group's log store, whose DeleteRange takes the snapshot gate shared.
type gatedLog struct {
	*raftstore.Store
	gate *sync.RWMutex
}

func (l gatedLog) DeleteRange(min, max uint64) error {
	l.gate.RLock()
	defer l.gate.RUnlock()
	return l.Store.DeleteRange(min, max)
}

// DeleteRange deletes log entries (raft truncating the log behind a snapshot) under the snapshot
// gate, taken shared.
func (l *bodyLog) DeleteRange(min, max uint64) error {
	l.db.snapGate.RLock()
	defer l.db.snapGate.RUnlock()
	return l.Store.DeleteRange(min, max)
}

// LinkTree makes dst a copy of the directory tree src: directories are created, files
// hard-linked, or copied where a link fails (another file system), and every directory synced.
// Entries for which skip reports true are left out, and so is an entry that disappears while the
// tree is walked. A missing src makes an empty dst. The files must not change while they are
// linked: the tree's owner only ever adds and removes whole files.
func LinkTree(src, dst string, skip func(name string) bool) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var dirs []string
	err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if path != src && skip != nil && skip(e.Name()) {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			dirs = append(dirs, to)
			return os.MkdirAll(to, 0o755)
		}
		err = linkOrCopy(path, to)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the walk listed it
		}
		return err
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

// linkOrCopy hard-links src to dst, or copies it (synced) when a link is not possible.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil || errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return CopyFile(src, dst)
}

// CopyFile copies the regular file src to dst (which must not exist), keeping its mode, and
// syncs the copy.
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Sync(), out.Close())
}

// syncDir fsyncs a directory, so that the entries made in it survive a crash.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// trimWALs cuts every WAL of a checkpoint in dir just after its last complete record. Pebble
// copies a WAL while its writer may be appending to it, so the copy can end with a record cut
// short, possibly followed by chunks of later records: a start would take that for damage. Every
// write committed before the checkpoint was flushed to the WAL before the copy began, so it lies
// before any cut.
func trimWALs(dir string) error {
	logs, err := walFiles(dir)
	if err != nil {
		return err
	}
	for _, path := range logs {
		end, err := completeEnd(path)
		if err != nil {
			return err
		}
		if err := truncateSynced(path, end); err != nil {
			return err
		}
	}
	return nil
}

// TrimWALs is trimWALs for another Pebble database's checkpoint (Rift's streams).
func TrimWALs(dir string) error { return trimWALs(dir) }

// completeEnd returns the offset just past the last complete record of the WAL at path, reading
// its chunks as a start does and stopping at the first that does not parse, or at a block's
// zeroed rest that could hold a chunk (nothing was written there yet; a shorter one is the
// padding a writer leaves when a header no longer fits).
func completeEnd(path string) (int64, error) {
	num, err := walNum(path)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var end int64
	header := legacyHeader // the chunk format's header, once a chunk was read
	buf := make([]byte, walBlock)
	for block := int64(0); ; block++ {
		n, err := io.ReadFull(f, buf)
		if n == 0 {
			if err == io.EOF {
				return end, nil
			}
			return 0, err
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return 0, err
		}
		b, base := buf[:n], block*walBlock
		for off := 0; off+legacyHeader <= len(b); {
			c := chunkAt(b, off, uint32(num))
			if c.kind == chunkZeros && len(b)-off < header {
				break // padding
			}
			if c.kind != chunkValid {
				return end, nil
			}
			header = c.header
			if c.completes() {
				end = base + int64(c.end)
			}
			off = c.end
		}
		if n < walBlock {
			return end, nil
		}
	}
}

// truncateSynced truncates the file at path to size and syncs it.
func truncateSynced(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Truncate(size), f.Sync(), f.Close())
}
