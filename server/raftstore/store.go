// Package raftstore keeps hashicorp/raft's log and stable store in Pebble, many Raft groups in one
// database, each under a key prefix of its own.
//
// Key layout under a group's prefix P (a group owns every key that starts with P followed by
// one of the two kind bytes below):
//
//	P 'l' <index:8 big-endian>   store.RaftLogRecord   one log entry; keys sort in log order
//	P 's' <key>                  raw value             a StableStore key (Set)
//	P 's' <key>                  <u64:8 big-endian>    a StableStore key (SetUint64)
//
// Log values are records generated from spec/store.yaml, prefixed with their record opcode,
// as server/storage writes its own records.
//
// The caller chooses the prefixes and owes this package one duty: no group's prefix is a prefix
// of another group's prefix (the set is prefix-free, as fixed-length IDs or names ending in a
// byte that names never contain make it), and nothing else in the database writes keys that start
// with a group's prefix. Otherwise the groups' key ranges overlap and each sees the other's
// entries.
//
// Durability: StoreLogs, DeleteRange, Set and SetUint64 return after their writes are fsynced
// (unless Options.NoSync). Pebble merges the WAL syncs of concurrent committers, so groups that
// commit at the same moment share one fsync; no lock is shared between groups.
//
// A copy of a group's state (a backup) is its database's owner's to take, not this package's: the
// log agrees with the group's snapshots, which raft keeps elsewhere, only if the copy holds off
// log truncation while it copies both (server/storage's Checkpoint).
package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/store"
)

const (
	kindLog    = 'l'
	kindStable = 's'
)

// ErrCorrupt reports a stored key or value that does not decode. Errors wrapping it name the
// group's prefix and the log index.
var ErrCorrupt = errors.New("raftstore: corrupt record")

// Options tunes a Store. The zero value is the production default.
type Options struct {
	// NoSync commits writes without waiting for fsync (the broker's --fsync=false): a crash of
	// the machine, not only of the process, may lose the latest writes, including Raft's term
	// and vote.
	NoSync bool
}

func (o Options) writeOptions() *pebble.WriteOptions {
	if o.NoSync {
		return pebble.NoSync
	}
	return pebble.Sync
}

// DB is the database the stores of a node share: every use of Pebble goes through it, so that
// its owner (server/storage) can refuse writes while the disk fails, turn Pebble's panics into
// errors and reopen the database. Pebble wraps a *pebble.DB that needs none of that.
type DB interface {
	// Read runs fn with the database; fn must not keep it, nor an iterator, after returning.
	Read(fn func(p *pebble.DB) error) error
	// Write runs fn, which builds and commits a write, with the database, or fails without
	// calling it.
	Write(fn func(p *pebble.DB) error) error
	// WriteStable is Write for a group's term and vote, which hashicorp/raft cannot take failing
	// (it panics): it may wait until the database accepts writes again.
	WriteStable(fn func(p *pebble.DB) error) error
}

// Pebble is a DB that uses p as it is.
func Pebble(p *pebble.DB) DB { return plainDB{p} }

type plainDB struct{ p *pebble.DB }

func (d plainDB) Read(fn func(p *pebble.DB) error) error        { return fn(d.p) }
func (d plainDB) Write(fn func(p *pebble.DB) error) error       { return fn(d.p) }
func (d plainDB) WriteStable(fn func(p *pebble.DB) error) error { return fn(d.p) }

// Store is the raft.LogStore and raft.StableStore of one Raft group. It is safe for concurrent
// use, as raft requires (its main, snapshot, metrics and replication goroutines all call it).
// The Store does not own the database: close every Store's raft before closing it.
type Store struct {
	db     DB
	prefix []byte
	wo     *pebble.WriteOptions

	// mu serialises this group's writes, so that the cached bounds follow the order in which
	// the writes commit. Readers never take it.
	mu sync.Mutex
	// first and last are the lowest and highest stored log index, 0 when the log is empty.
	first, last atomic.Uint64
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// New returns the store of the group under prefix (copied), reading the log's first and last
// index once. See the package comment for what prefix must satisfy.
func New(db DB, prefix []byte, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("raftstore: nil database")
	}
	if len(prefix) == 0 {
		return nil, errors.New("raftstore: empty group prefix")
	}
	s := &Store{db: db, prefix: bytes.Clone(prefix), wo: opts.writeOptions()}
	first, last, err := s.scanBounds()
	if err != nil {
		return nil, err
	}
	s.first.Store(first)
	s.last.Store(last)
	return s, nil
}

// Prefix returns the group's key prefix. The caller must not modify it.
func (s *Store) Prefix() []byte { return s.prefix }

// FirstIndex returns the lowest stored log index, 0 when the log is empty. It reads a cached
// value and never touches Pebble.
func (s *Store) FirstIndex() (uint64, error) { return s.first.Load(), nil }

// LastIndex returns the highest stored log index, 0 when the log is empty. It reads a cached
// value and never touches Pebble.
func (s *Store) LastIndex() (uint64, error) { return s.last.Load(), nil }

// GetLog reads the entry at index into l, or returns raft.ErrLogNotFound. l's byte slices are
// fresh copies that the caller (raft) may keep.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	return s.db.Read(func(p *pebble.DB) error {
		val, closer, err := p.Get(s.logKey(nil, index))
		if errors.Is(err, pebble.ErrNotFound) {
			return raft.ErrLogNotFound
		}
		if err != nil {
			return fmt.Errorf("raftstore: group %q: get log %d: %w", s.prefix, index, err)
		}
		defer closer.Close()
		return s.decodeLog(index, val, l)
	})
}

// StoreLog stores one entry; see StoreLogs.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes every entry in one Pebble batch and returns once it is durable (fsynced,
// unless Options.NoSync): this is the point at which the broker's writes become durable. An
// entry at an index already stored replaces it. The entries need not be contiguous.
//
// An error leaves the outcome unknown: when Pebble's WAL fsync fails, it has already applied the
// batch to its memtable (the entries are readable, and durable if the data reached the disk
// anyway), while the cached bounds here are not advanced. raft writes its next entries over the
// failed indexes; a restart before that finds them in the log and applies them.
func (s *Store) StoreLogs(logs []*raft.Log) error { return s.StoreLogsWith(logs, 0, nil) }

// StoreLogsWith is StoreLogs with more writes in the same batch: extra adds them, and they are
// durable exactly when the entries are (the broker stores message bodies beside their entries).
// extraBytes is about how much room they take in the batch, so that it is allocated once.
func (s *Store) StoreLogsWith(logs []*raft.Log, extraBytes int, extra func(b *pebble.Batch)) error {
	if len(logs) == 0 {
		return nil
	}
	recs := make([]store.RaftLogRecord, len(logs))
	keyLen := len(s.prefix) + 1 + 8
	size := 0
	lo, hi := logs[0].Index, logs[0].Index
	for i, l := range logs {
		recs[i] = store.RaftLogRecord{Index: l.Index, Term: l.Term, Type: uint8(l.Type),
			Data: l.Data, Extensions: l.Extensions, AppendedAt: unixNano(l.AppendedAt)}
		if err := recs[i].Check(); err != nil {
			return fmt.Errorf("raftstore: group %q: log %d: %w", s.prefix, l.Index, err)
		}
		size += keyLen + 1 + recs[i].Size() + 16 // 16: a generous bound on the batch's per-entry header
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.db.Write(func(p *pebble.DB) error {
		b := p.NewBatchWithSize(size + extraBytes)
		defer b.Close()
		for i := range recs {
			op := b.SetDeferred(keyLen, 1+recs[i].Size())
			s.logKey(op.Key[:0], recs[i].Index)
			op.Value[0] = byte(store.OpRaftLogRecord)
			// AppendTo fills op.Value in place; a length other than Size() would mean a codec bug.
			if out := recs[i].AppendTo(op.Value[1:1]); len(out) != len(op.Value)-1 {
				return fmt.Errorf("raftstore: group %q: log %d encoded to %d bytes, want %d", s.prefix,
					recs[i].Index, len(out), len(op.Value)-1)
			}
			if err := op.Finish(); err != nil {
				return fmt.Errorf("raftstore: group %q: batch: %w", s.prefix, err)
			}
		}
		if extra != nil {
			extra(b)
		}
		return b.Commit(s.wo)
	})
	if err != nil {
		return fmt.Errorf("raftstore: group %q: store logs %d..%d: %w", s.prefix, lo, hi, err)
	}
	if first := s.first.Load(); first == 0 || lo < first {
		s.first.Store(lo)
	}
	if hi > s.last.Load() {
		s.last.Store(hi)
	}
	return nil
}

// DeleteRange deletes the entries from min to max, both inclusive, with one Pebble range
// deletion, durable as StoreLogs is. The cached bounds are then found again by seeking, so
// they stay exact even where the log has gaps.
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	start := s.logKey(nil, min)
	var end []byte
	if max == ^uint64(0) {
		end = s.kindEnd(kindLog)
	} else {
		end = s.logKey(nil, max+1)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.db.Write(func(p *pebble.DB) error { return p.DeleteRange(start, end, s.wo) }); err != nil {
		return fmt.Errorf("raftstore: group %q: delete logs %d..%d: %w", s.prefix, min, max, err)
	}
	first, last := s.first.Load(), s.last.Load()
	if first == 0 || max < first || min > last {
		return nil // nothing stored in the range
	}
	if min <= first || max >= last {
		var err error
		if first, last, err = s.scanBounds(); err != nil {
			return err
		}
		s.first.Store(first)
		s.last.Store(last)
	}
	return nil
}

// DropGroup deletes every key of the group under prefix (its log and its stable store) with
// two range deletions committed in one batch. It is for a group that is gone for good, such as
// a deleted queue's: stop the group's raft and discard its Store first, since a Store still
// open keeps its cached bounds.
func DropGroup(db DB, prefix []byte, opts Options) error {
	if len(prefix) == 0 {
		return errors.New("raftstore: empty group prefix")
	}
	s := &Store{prefix: prefix}
	err := db.Write(func(p *pebble.DB) error {
		b := p.NewBatch()
		defer b.Close()
		for _, kind := range []byte{kindLog, kindStable} {
			lo := append(append([]byte(nil), prefix...), kind)
			if err := b.DeleteRange(lo, s.kindEnd(kind), nil); err != nil {
				return err
			}
		}
		return b.Commit(opts.writeOptions())
	})
	if err != nil {
		return fmt.Errorf("raftstore: group %q: drop: %w", prefix, err)
	}
	return nil
}

// logKey appends P 'l' <index> to dst.
func (s *Store) logKey(dst []byte, index uint64) []byte {
	dst = append(append(dst, s.prefix...), kindLog)
	return binary.BigEndian.AppendUint64(dst, index)
}

// kindEnd returns the exclusive upper bound of every key of the given kind: P (kind+1).
func (s *Store) kindEnd(kind byte) []byte {
	return append(append([]byte(nil), s.prefix...), kind+1)
}

// scanBounds finds the lowest and highest stored log index by seeking the log key range.
func (s *Store) scanBounds() (first, last uint64, err error) {
	lo := append(append([]byte(nil), s.prefix...), kindLog)
	err = s.db.Read(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: s.kindEnd(kindLog)})
		if err != nil {
			return err
		}
		if it.First() {
			first, err = s.keyIndex(it.Key())
			if err == nil && it.Last() {
				last, err = s.keyIndex(it.Key())
			}
		}
		if err == nil {
			err = it.Error()
		}
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("raftstore: group %q: scan log: %w", s.prefix, err)
	}
	return first, last, nil
}

// keyIndex returns the index of a key in the group's log range.
func (s *Store) keyIndex(key []byte) (uint64, error) {
	if len(key) != len(s.prefix)+1+8 {
		return 0, fmt.Errorf("%w: group %q: log key of %d bytes", ErrCorrupt, s.prefix, len(key))
	}
	return binary.BigEndian.Uint64(key[len(s.prefix)+1:]), nil
}

// decodeLog decodes the value stored at index into l, copying every byte it keeps out of val.
func (s *Store) decodeLog(index uint64, val []byte, l *raft.Log) error {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: group %q log %d: %s", ErrCorrupt, s.prefix, index, fmt.Sprintf(format, args...))
	}
	if len(val) == 0 || store.Opcode(val[0]) != store.OpRaftLogRecord {
		if len(val) == 0 {
			return corrupt("empty value")
		}
		return corrupt("record %v, want %v", store.Opcode(val[0]), store.OpRaftLogRecord)
	}
	var rec store.RaftLogRecord
	if err := rec.Decode(val[1:]); err != nil {
		return corrupt("%v", err)
	}
	if rec.Index != index {
		return corrupt("record holds index %d", rec.Index)
	}
	// One allocation holds both byte fields; each is capped so that an append cannot run into
	// the other. Empty fields come back nil.
	var data, ext []byte
	if n := len(rec.Data) + len(rec.Extensions); n > 0 {
		buf := make([]byte, n)
		nd := copy(buf, rec.Data)
		copy(buf[nd:], rec.Extensions)
		if nd > 0 {
			data = buf[:nd:nd]
		}
		if nd < n {
			ext = buf[nd:]
		}
	}
	*l = raft.Log{Index: rec.Index, Term: rec.Term, Type: raft.LogType(rec.Type), Data: data,
		Extensions: ext, AppendedAt: fromUnixNano(rec.AppendedAt)}
	return nil
}

// unixNano encodes t, the zero time as 0.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
