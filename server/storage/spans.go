package storage

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// splitter decides where flushes and compactions end their output sstables (Pebble's
// SpanPolicyFunc, the default policy everywhere). Each cut keeps a compaction from rewriting
// stored keys it does not change:
//
//  1. At each key kind's end, so that no sstable holds keys of two kinds. Without it, a flush of
//     a busy queue wrote one file from the queue's applied index ("a…") to its Raft log ("r…"),
//     over every queue's bodies ("b…") between, and each compaction of it into the level below
//     rewrote every key of a standing backlog there: after a fill of 1 M messages a server spent
//     about 40% of its CPU in compactions under a lifecycle load on any queue
//     (docs/benchmarks.md, branch lsm).
//  2. Around the bodies of each queue with a standing backlog (Stored), so that a flush of the
//     queues on either side of it does not span its bodies.
//  3. Inside a standing backlog, where its bodies older than every unflushed memtable end: a
//     flush of the queue holds deletions at its head (acked bodies) and insertions at its tail
//     (enqueued ones), and as one file it spanned the whole backlog between, which each
//     compaction of it rewrote: at 1 M messages every half second, half the server's lifecycle
//     rate (docs/benchmarks.md, run AB). A message ID is a UUIDv7, so a body's key orders by the
//     time its message was accepted, and everything a flush inserts was accepted after the
//     oldest memtable it writes was made (less idSkew).
//
// The cuts change only which sstables hold the keys: nothing written, synced or read differs.
type splitter struct {
	// backlogs are the queues with a standing backlog, sorted; replaced whole under mu.
	backlogs atomic.Pointer[[]string]
	mu       sync.Mutex
	// enter and leave are the stored messages from which a queue has a standing backlog, and
	// below which it no longer has one (apart, so that a queue near the bound does not flap).
	enter, leave int
	memtables    memtableAges
}

// Layout is an optional ability of a Store: told how many messages each queue group stores, it
// keeps the bodies of a standing backlog in sstables of their own. The Pebble DB has it; the
// in-memory twin does not.
type Layout interface {
	Stored(queue string, messages int)
}

var _ Layout = (*DB)(nil)

// defaultBacklogMessages is the stored messages from which a queue's bodies get sstables of their
// own: about 4 MiB of sstables (keys and references to the values, not the values). A compaction
// through a smaller queue rewrites at most about that much of it.
const defaultBacklogMessages = 250_000

// idSkew is how long before its body is written a message's ID may have been made (its enqueue's
// proposal and commit; another node's clock). A body written later than that, as a replica
// catching up writes them, lands on the older side of cut 3: its flush spans the backlog again,
// as before the cuts, and nothing is wrong but the cost.
const idSkew = time.Second

func newSplitter(backlogMessages int, memTableBytes uint64) *splitter {
	s := &splitter{enter: backlogMessages, leave: backlogMessages / 2}
	s.backlogs.Store(new([]string))
	// Pebble stops writes once its memtables waiting for a flush hold 4 × MemTableSize bytes,
	// and after an open its memtables start at 256 KiB and double up to MemTableSize: a flush
	// writes none made before the last this many.
	s.memtables.made = make([]time.Time, memTableStopWrites+bits.Len64(memTableBytes>>18)+1)
	return s
}

// Stored tells the store how many messages a queue group holds: a queue at defaultBacklogMessages
// or more has a standing backlog (cuts 2 and 3), until it falls below half of that. The broker
// calls it after each round; it is cheap unless the queue crosses a bound.
func (d *DB) Stored(queue string, messages int) { d.spans.stored(queue, messages) }

func (s *splitter) stored(queue string, messages int) {
	if _, changed := s.crossed(queue, messages); !changed {
		return // the common case, without the lock
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if backlogs, changed := s.crossed(queue, messages); changed {
		s.backlogs.Store(&backlogs)
	}
}

// crossed returns the backlogs with queue in or out as its stored messages say, and whether that
// changes them (a new slice then: the published one is never changed).
func (s *splitter) crossed(queue string, messages int) ([]string, bool) {
	backlogs := *s.backlogs.Load()
	i, was := slices.BinarySearch(backlogs, queue)
	switch {
	case !was && messages >= s.enter:
		return slices.Insert(slices.Clone(backlogs), i, queue), true
	case was && messages < s.leave:
		return slices.Delete(slices.Clone(backlogs), i, i+1), true
	}
	return backlogs, false
}

// forget drops a deleted queue from the standing backlogs.
func (s *splitter) forget(queue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	backlogs := *s.backlogs.Load()
	if i, was := slices.BinarySearch(backlogs, queue); was {
		backlogs = slices.Delete(slices.Clone(backlogs), i, i+1)
		s.backlogs.Store(&backlogs)
	}
}

// split is the SpanPolicyFunc. Its end key is always past start, or nil (no end).
func (s *splitter) split(start []byte) (pebble.SpanPolicy, []byte, error) {
	if len(start) == 0 || start[0] == 0xff {
		return pebble.SpanPolicy{}, nil, nil
	}
	end := []byte{start[0] + 1}
	if start[0] == kindBody {
		if e := s.splitBodies(start); e != nil && bytes.Compare(start, e) < 0 {
			end = e
		}
	}
	return pebble.SpanPolicy{}, end, nil
}

// splitBodies returns where an output starting at the body key start ends inside the bodies: at
// the next standing backlog's first key, or inside one at the boundary between its old bodies and
// the recent ones, or at its last key. nil when no cut comes before the kind's end.
func (s *splitter) splitBodies(start []byte) []byte {
	sep := bytes.IndexByte(start[1:], 0)
	if sep < 0 {
		return nil
	}
	queue, id := string(start[1:1+sep]), start[2+sep:]
	backlogs := *s.backlogs.Load()
	i, found := slices.BinarySearch(backlogs, queue)
	if !found {
		if i == len(backlogs) {
			return nil
		}
		return groupPrefix(kindBody, backlogs[i])
	}
	if made, ok := s.memtables.oldest(); ok {
		boundary := made.Add(-idSkew).UnixMilli()
		if idMillis(id) < boundary {
			var ms [8]byte
			binary.BigEndian.PutUint64(ms[:], uint64(boundary))
			return append(groupPrefix(kindBody, queue), ms[2:]...)
		}
	}
	return groupEnd(kindBody, queue)
}

// idMillis is the Unix millisecond time in a UUIDv7's first 48 bits (as far as id has them).
func idMillis(id []byte) int64 {
	var ms [8]byte
	copy(ms[2:], id[:min(len(id), 6)])
	return int64(binary.BigEndian.Uint64(ms[:]))
}

// groupEnd is the first key past every key of a group under kind: "<kind><queue>\x01".
func groupEnd(kind byte, queue string) []byte {
	return append(append([]byte{kind}, queue...), 1)
}

// memtableAges remembers when the latest memtables were made: each comes with a WAL, whose
// creation Pebble reports.
type memtableAges struct {
	mu   sync.Mutex
	made []time.Time // a ring: made[n%len(made)] is the next to be replaced
	n    int         // memtables made since the open
}

// memTableStopWrites is Pebble's MemTableStopWritesThreshold in this store.
const memTableStopWrites = 4

func (m *memtableAges) add(t time.Time) {
	m.mu.Lock()
	m.made[m.n%len(m.made)] = t
	m.n++
	m.mu.Unlock()
}

// oldest is when the oldest memtable that a flush may still write was made at the latest; false
// before the first memtable is known.
func (m *memtableAges) oldest() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n < len(m.made) {
		return m.made[0], m.n > 0
	}
	return m.made[m.n%len(m.made)], true
}
