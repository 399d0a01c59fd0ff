// Package storage keeps the broker's durable state in one Pebble database, shared by every Raft
// group of the node.
//
// Key layout (every key starts with a one-byte kind):
//
//	F                       format marker: the store format version, a big-endian u32
//	R…                      the meta group's Raft log and stable store (server/raftstore under metaRaftPrefix)
//	r<queue>\x00…           a queue group's Raft log and stable store (under queueRaftPrefix)
//	b<queue>\x00<id:16>     store.MessageRecord  a message body (headers and payload) of a queue group,
//	                                             written with the log entry that carries it
//	a<queue>                u64 big-endian       the last log index a queue group applied to its bodies
//
// Queue names are never empty and never contain NUL, so "<queue>\x00" is an unambiguous prefix.
// Everything else a queue holds — which messages it has, in which state, its leases, attempts,
// its deduplication memory — is the engine state that its Raft log and snapshots rebuild
// (server/queuegroup); it is not stored here.
//
// Durability: a group's Raft log store fsyncs each append (the durability point), bodies
// included. Acked bodies are deleted by the group's state machine without an fsync of its own,
// with the applied index in the same batch: Pebble's WAL is written in order, so a crash loses at
// most the latest deletions, and a restart re-applies the entries after the applied index.
//
// Backups: Checkpoint copies the database and the groups' snapshots as of one moment, a directory
// a server starts on as after a crash at that moment (backup.go).
package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/filamq/fila/generated/store"
)

// ID is a message ID as stored in keys.
type ID = [16]byte

// FormatVersion is the store format this package reads and writes. Format 1 (before the queue
// log) kept queue definitions, message state and lease logs beside the bodies.
const FormatVersion = 2

const (
	kindFormat   = 'F'
	kindMetaRaft = 'R'
	kindRaft     = 'r'
	kindBody     = 'b'
	kindApplied  = 'a'
)

// ErrCorrupt reports a stored value that does not decode.
var ErrCorrupt = errors.New("storage: corrupt record")

// ErrNotFound reports a missing key.
var ErrNotFound = errors.New("storage: not found")

// FormatError reports a data directory written in another store format.
type FormatError struct {
	Dir     string
	Version uint32 // the version found; 1 for a store without a marker
}

func (e *FormatError) Error() string {
	if e.Version < FormatVersion {
		return fmt.Sprintf("storage: %s holds store format %d (written before the queue log); this server reads format %d. "+
			"Drain it with the previous release, or move the directory away to start empty", e.Dir, e.Version, FormatVersion)
	}
	return fmt.Sprintf("storage: %s holds store format %d, newer than this server's %d; run a newer release", e.Dir, e.Version, FormatVersion)
}

// DB is the broker's store. It is safe for concurrent use. Every use of Pebble goes through
// Read or Write (guard.go): a failing disk makes it refuse writes, never crash, and it accepts
// writes again by itself once the disk does.
type DB struct {
	// mu is held shared by every use of p, and exclusively while p is replaced.
	mu       sync.RWMutex
	p        *pebble.DB // nil when closed, or when no reopen has succeeded yet
	readOnly bool       // p was reopened read-only after a failed read-write open
	po       *pebble.Options
	dir      string
	noSync   bool
	h        *health
	log      *slog.Logger
	res      *reserve
	// broken is set when Pebble itself saw a failure (its WAL keeps the error): the recovery
	// reopens the database. Under mu, or set while holding it shared (atomic).
	broken atomic.Bool
	// snapGate is held exclusively while Checkpoint copies the store, and shared by whatever
	// changes which snapshots and log entries a group has (backup.go).
	snapGate sync.RWMutex
	stalls   stalls    // Pebble's write stalls (lsm.go)
	spans    *splitter // where flushes and compactions end their sstables (spans.go)

	recoverEvery time.Duration
	closing      chan struct{}
	closeOnce    sync.Once
}

// Options tunes the store. The zero value is the production default.
type Options struct {
	// CacheBytes is Pebble's block cache size (default 32 MiB).
	CacheBytes int64
	// MemTableBytes is Pebble's memtable size (default 32 MiB).
	MemTableBytes uint64
	// NoSync appends to the Raft logs without an fsync (the broker's --fsync=false).
	NoSync bool
	// Logger receives Pebble's errors and warnings and the store's own (slog.Default()).
	Logger *slog.Logger
	// RecoverInterval is how often a store refusing writes after a failure tests the disk (1 s).
	RecoverInterval time.Duration
	// Salvage starts on a directory whose WAL is damaged (not merely torn by a crash) by dropping
	// what follows the damage, keeping the original file and logging what was dropped
	// (damage.go). Without it such a start fails with a *DamageError.
	Salvage bool
	// ReserveBytes is the disk space set aside for the writes in progress when the disk fills up
	// (reserve.go): MemTableBytes + 16 MiB by default (one flush in progress and the commits in
	// flight).
	ReserveBytes int64
	// fs is the file system under the store (vfs.Default); tests wrap it to inject errors.
	fs vfs.FS
	// backlogMessages is the stored messages that make a standing backlog (spans.go;
	// defaultBacklogMessages when 0); tests lower it.
	backlogMessages int
}

// ReserveSize returns the disk space a store opened with o sets aside (ReserveBytes, or its
// default from MemTableBytes, whose own default Open applies first). The engine's scratch files
// keep as much of the disk free, so that a full disk is met by the store.
func (o Options) ReserveSize() int64 {
	if o.ReserveBytes != 0 {
		return o.ReserveBytes
	}
	return int64(cmp.Or(o.MemTableBytes, defaultMemTableBytes)) + 16<<20
}

// defaultMemTableBytes is MemTableBytes's default.
const defaultMemTableBytes = 32 << 20

// separateValuesFrom is the smallest value stored in a blob file rather than inline.
const separateValuesFrom = 256

// Open opens (creating if needed) the store in dir. A directory written in another store format
// is refused with a *FormatError.
func Open(dir string, o Options) (*DB, error) {
	if o.CacheBytes == 0 {
		o.CacheBytes = 32 << 20
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = defaultMemTableBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RecoverInterval <= 0 {
		o.RecoverInterval = recoverInterval
	}
	o.ReserveBytes = o.ReserveSize()
	if o.fs == nil {
		o.fs = vfs.Default
	}
	if o.backlogMessages == 0 {
		o.backlogMessages = defaultBacklogMessages
	}
	if err := CheckNotInUse(dir); err != nil {
		return nil, err // before the WAL is read: another process is writing it
	}
	if err := checkDamage(dir, o.Salvage, o.Logger); err != nil {
		return nil, err
	}
	d := &DB{dir: dir, noSync: o.NoSync, h: newHealth(), log: o.Logger, recoverEvery: o.RecoverInterval,
		closing: make(chan struct{})}
	d.spans = newSplitter(o.backlogMessages, o.MemTableBytes)
	d.res = &reserve{path: filepath.Join(dir, reserveName), bytes: o.ReserveBytes, full: d.diskFull}
	if err := d.res.allocate(); err != nil {
		return nil, err
	}
	// The store keeps its reference to the cache until Close: a reopen gives it to the new database.
	cache := pebble.NewCache(o.CacheBytes)
	po := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                o.MemTableBytes,
		MemTableStopWritesThreshold: memTableStopWrites,
		Logger:                      pebbleLogger{d},
		FS:                          reserveFS{FS: o.fs, dir: filepath.Clean(dir), r: d.res, wals: newWALFills(o)},
		EventListener:               d.eventListener(),
		// Message bodies and Raft entries go to blob files, and sstables keep only references to
		// them: a backlog that outlives its memtable is compacted as small keys rather than
		// rewritten with every body, and blob files whose contents were all deleted (acked bodies,
		// truncated log entries) are dropped whole (docs/benchmarks.md).
		FormatMajorVersion: pebble.FormatValueSeparation,
	}
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: separateValuesFrom, MaxBlobReferenceDepth: 10,
			RewriteMinimumAge: 5 * time.Minute, TargetGarbageRatio: 0.2}
	}
	po.Experimental.SpanPolicyFunc = d.spans.split
	d.po = po
	p, err := openPebble(dir, po, false)
	if err != nil {
		cache.Unref()
		if iu := inUse(dir, err); iu != err {
			return nil, iu // another process took the lock since CheckNotInUse
		}
		return nil, fmt.Errorf("storage: open %s: %w", dir, err)
	}
	d.p = p
	if err := removeStaging(dir); err != nil {
		d.log.Warn("storage: removing a checkpoint a crash cut short", "dir", dir, "err", err)
	}
	if err := d.checkFormat(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// newWALFills returns the zero-filling of the WALs (walfill.go), at most as much as Pebble
// preallocates for one (its MemTableSize plus a tenth); none when the WAL is never synced.
func newWALFills(o Options) *walFills {
	if o.NoSync {
		return nil
	}
	return &walFills{max: int64(o.MemTableBytes) + int64(o.MemTableBytes)/10, busy: walFillBusy}
}

// checkFormat accepts a store of this format, marks an empty one, and refuses any other.
func (d *DB) checkFormat() error {
	p, dir := d.p, d.dir
	val, closer, err := p.Get([]byte{kindFormat})
	if err == nil {
		defer closer.Close()
		if len(val) != 4 {
			return fmt.Errorf("%w: format marker %x", ErrCorrupt, val)
		}
		if v := binary.BigEndian.Uint32(val); v != FormatVersion {
			return &FormatError{Dir: dir, Version: v}
		}
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("storage: read format marker: %w", err)
	}
	it, err := p.NewIter(nil)
	if err != nil {
		return err
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return err
	}
	if !empty {
		return &FormatError{Dir: dir, Version: 1}
	}
	return d.Write(func(p *pebble.DB) error {
		return p.Set([]byte{kindFormat}, binary.BigEndian.AppendUint32(nil, FormatVersion), pebble.Sync)
	})
}

// Close stops the recovery, if one runs, and closes the store.
func (d *DB) Close() error {
	first := false
	d.closeOnce.Do(func() { close(d.closing); first = true })
	if !first {
		return nil
	}
	if d.h.isStuck() {
		// Closing Pebble would block on its locked commit pipeline, and the store's lock on the
		// commits blocked there: the process is to exit with the database open.
		return errStuck
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.po.Cache.Unref()
	if d.p == nil {
		return nil
	}
	err := closePebble(d.p)
	d.p = nil
	return err
}

// metaRaftPrefix is the key prefix of the meta group's Raft log and stable store.
func metaRaftPrefix() []byte { return []byte{kindMetaRaft} }

// queueRaftPrefix is the key prefix of a queue group's Raft log and stable store. No group's
// prefix is a prefix of another's.
func queueRaftPrefix(queue string) []byte { return groupPrefix(kindRaft, queue) }

func groupPrefix(kind byte, queue string) []byte {
	return append(append([]byte{kind}, queue...), 0)
}

func bodyKey(dst []byte, queue string, id ID) []byte {
	dst = append(append(dst, kindBody), queue...)
	dst = append(dst, 0)
	return append(dst, id[:]...)
}

func appliedKey(queue string) []byte { return append([]byte{kindApplied}, queue...) }

// Applied returns the last log index whose bodies a queue group has written (0 if none).
func (d *DB) Applied(queue string) (applied uint64, err error) {
	err = d.Read(func(p *pebble.DB) error {
		val, closer, err := p.Get(appliedKey(queue))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer closer.Close()
		if len(val) != 8 {
			return fmt.Errorf("%w: applied index of %q: %x", ErrCorrupt, queue, val)
		}
		applied = binary.BigEndian.Uint64(val)
		return nil
	})
	return applied, err
}

// Batch collects applied log entries' body deletions. It is not safe for concurrent use.
type Batch struct {
	db    *DB
	queue string
	keys  []byte // the body keys to delete, each len(key) long
	key   int    // the length of a body key of this queue
}

// NewBatch returns an empty batch of writes to queue group queue's bodies.
func (d *DB) NewBatch(queue string) BodyBatch {
	return &Batch{db: d, queue: queue, key: len(bodyKey(nil, queue, ID{}))}
}

// DeleteBody removes a message body.
func (b *Batch) DeleteBody(id ID) { b.keys = bodyKey(b.keys, b.queue, id) }

// Commit writes the batch with the group's applied index, without an fsync (the Raft log is the
// durability point), and resets the batch for the next entry.
func (b *Batch) Commit(applied uint64) error {
	keys := b.keys
	b.keys = b.keys[:0]
	err := b.db.Write(func(p *pebble.DB) error {
		pb := p.NewBatch()
		defer pb.Close()
		for i := 0; i+b.key <= len(keys); i += b.key {
			_ = pb.Delete(keys[i:i+b.key], nil)
		}
		_ = pb.Set(appliedKey(b.queue), binary.BigEndian.AppendUint64(nil, applied), nil)
		return pb.Commit(pebble.NoSync)
	})
	if err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	return nil
}

// Close releases the batch without committing it.
func (b *Batch) Close() { b.keys = nil }

// DropQueue deletes every body, the applied index, the Raft state and the snapshots of a queue
// group, durably.
func (d *DB) DropQueue(queue string) error {
	d.snapGate.RLock()
	defer d.snapGate.RUnlock()
	// The snapshots go first: a crash between the two leaves a log the next start drops again
	// (the broker's dropOrphans), never snapshots without a log.
	if err := removeSnapshots(d.snapshotDir(queue)); err != nil {
		return fmt.Errorf("storage: drop %q: %w", queue, err)
	}
	err := d.Write(func(p *pebble.DB) error {
		b := p.NewBatch()
		defer b.Close()
		for _, kind := range []byte{kindBody, kindRaft} {
			_ = b.DeleteRange(groupPrefix(kind, queue), groupEnd(kind, queue), nil)
		}
		_ = b.Delete(appliedKey(queue), nil)
		return b.Commit(pebble.Sync)
	})
	if err != nil {
		return fmt.Errorf("storage: drop %q: %w", queue, err)
	}
	d.spans.forget(queue)
	return nil
}

// Body is a message's headers and payload.
type Body struct {
	Headers map[string]string
	Payload []byte
}

// ReadBody returns a message body, copied out of storage.
func (d *DB) ReadBody(queue string, id ID) (body Body, err error) {
	err = d.Read(func(p *pebble.DB) error {
		val, closer, err := p.Get(bodyKey(nil, queue, id))
		if errors.Is(err, pebble.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		defer closer.Close()
		var r store.MessageRecord
		if err := decode(val, &r); err != nil {
			return fmt.Errorf("body %x of %q: %w", id, queue, err)
		}
		body = Body{Headers: r.Headers, Payload: bytes.Clone(r.Payload)}
		return nil
	})
	return body, err
}

// ReadBodiesLater takes a consistent view of the store now and returns read, which reads the
// bodies of ids, which must be sorted ascending, from that view with one iterator: a run of
// neighbouring messages costs one seek and steps, and shares data blocks. A write or deletion
// after the call is not seen. read's fn receives each body found; its payload is valid only
// during the call. IDs with no body are skipped. read may run on another goroutine and must be
// called exactly once: until then the view holds off a reopen of the database.
func (d *DB) ReadBodiesLater(queue string, ids []ID) (read func(fn func(i int, headers map[string]string, payload []byte)) error) {
	if len(ids) == 0 {
		return func(func(int, map[string]string, []byte)) error { return nil }
	}
	d.mu.RLock()
	lo := groupPrefix(kindBody, queue)
	var it *pebble.Iterator
	err := d.read(func(p *pebble.DB) (err error) {
		it, err = p.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: append(bytes.Clone(lo[:len(lo)-1]), 1)})
		return err
	})
	if err != nil {
		d.mu.RUnlock()
		return func(func(int, map[string]string, []byte)) error { return err }
	}
	return func(fn func(i int, headers map[string]string, payload []byte)) error {
		defer d.mu.RUnlock()
		return d.try(func(*pebble.DB) error {
			err := readBodies(it, lo, queue, ids, fn)
			if cerr := it.Close(); err == nil {
				err = cerr
			}
			return err
		})
	}
}

// readBodies reads the bodies of ids (ascending) with it, an iterator over the bodies under lo.
func readBodies(it *pebble.Iterator, lo []byte, queue string, ids []ID, fn func(i int, headers map[string]string, payload []byte)) error {
	key := make([]byte, 0, len(lo)+16)
	var rec store.MessageRecord
	valid := false // it is positioned at a key
	for i, id := range ids {
		key = append(append(key[:0], lo...), id[:]...)
		// A backlog's oldest messages are neighbouring keys: step to the next key, and seek only
		// when the wanted one lies further.
		if valid && bytes.Compare(it.Key(), key) < 0 {
			valid = it.Next()
		}
		if !valid || bytes.Compare(it.Key(), key) < 0 {
			if valid = it.SeekGE(key); !valid {
				break // no key at or after this one: the rest have no body either
			}
		}
		if !bytes.Equal(it.Key(), key) {
			continue
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := decode(val, &rec); err != nil {
			return fmt.Errorf("body %x of %q: %w", id, queue, err)
		}
		fn(i, rec.Headers, rec.Payload)
	}
	return it.Error()
}

// Queues lists the queue groups that have Raft state, for finding groups left behind by a
// deletion that a crash interrupted.
func (d *DB) Queues() (out []string, err error) {
	err = d.Read(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: []byte{kindRaft}, UpperBound: []byte{kindRaft + 1}})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); {
			k := it.Key()
			end := bytes.IndexByte(k[1:], 0)
			if end < 0 {
				return fmt.Errorf("%w: raft key %x", ErrCorrupt, k)
			}
			name := string(k[1 : 1+end])
			out = append(out, name)
			it.SeekGE(append(append([]byte{kindRaft}, name...), 1))
		}
		return it.Error()
	})
	return out, err
}

func decode(val []byte, r *store.MessageRecord) error {
	if len(val) == 0 || store.Opcode(val[0]) != r.Opcode() {
		return fmt.Errorf("%w: want %v", ErrCorrupt, r.Opcode())
	}
	if err := r.Decode(val[1:]); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}
