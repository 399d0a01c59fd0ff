package storage

import (
	"bytes"
	"encoding/binary"
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
//  2. Around the bodies of each queue with a standing backlog (backlogs below), so that a flush
//     of the queues on either side of it does not span its bodies.
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
	// backlogs are the queues whose bodies' sstables hold at least backlogBytes, sorted; set by
	// DB.findBacklogs.
	backlogs     atomic.Pointer[[]string]
	backlogBytes uint64 // from the store's options; set before the store opens
	memtables    memtableAges
}

// defaultBacklogBytes is the size of a queue's body sstables (keys and references to the values, not the
// values) from which its bodies get sstables of their own: about 250,000 messages. A compaction
// through a smaller queue rewrites at most this much of it.
const defaultBacklogBytes = 4 << 20

// idSkew is how long before its body is written a message's ID may have been made (its enqueue's
// proposal and commit; another node's clock).
const idSkew = time.Second

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
	var backlogs []string
	if p := s.backlogs.Load(); p != nil {
		backlogs = *p
	}
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
// creation Pebble reports. Pebble stops writes while it holds memTableStopWrites memtables, so a
// flush writes none made before the memtablesKept-th latest.
type memtableAges struct {
	mu   sync.Mutex
	made [memtablesKept]time.Time // a ring: made[n%memtablesKept] is the next to be replaced
	n    int                      // memtables made since the open
}

// memTableStopWrites is Pebble's MemTableStopWritesThreshold in this store.
const memTableStopWrites = 4

const memtablesKept = memTableStopWrites + 1

func (m *memtableAges) add(t time.Time) {
	m.mu.Lock()
	m.made[m.n%memtablesKept] = t
	m.n++
	m.mu.Unlock()
}

// oldest is when the oldest memtable that a flush may still write was made at the latest; false
// before the first memtable is known.
func (m *memtableAges) oldest() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n < memtablesKept {
		return m.made[0], m.n > 0
	}
	return m.made[m.n%memtablesKept], true
}

// findBacklogs sets the queues with a standing backlog from the sstables' metadata. A table whose
// bodies start and end in different queues counts for both.
func (d *DB) findBacklogs() error {
	var levels [][]pebble.SSTableInfo
	err := d.Read(func(p *pebble.DB) (err error) {
		levels, err = p.SSTables()
		return err
	})
	if err != nil {
		return err
	}
	sizes := map[string]uint64{}
	for _, level := range levels {
		for _, t := range level {
			lo, hi := bodyQueue(t.Smallest.UserKey), bodyQueue(t.Largest.UserKey)
			if lo != "" {
				sizes[lo] += t.Size
			}
			if hi != "" && hi != lo {
				sizes[hi] += t.Size
			}
		}
	}
	var backlogs []string
	for q, n := range sizes {
		if n >= d.spans.backlogBytes {
			backlogs = append(backlogs, q)
		}
	}
	slices.Sort(backlogs)
	d.spans.backlogs.Store(&backlogs)
	return nil
}

// bodyQueue is the queue of a body key; "" for another key.
func bodyQueue(key []byte) string {
	if len(key) == 0 || key[0] != kindBody {
		return ""
	}
	sep := bytes.IndexByte(key[1:], 0)
	if sep < 0 {
		return ""
	}
	return string(key[1 : 1+sep])
}

// findBacklogsInterval is how often the store looks for standing backlogs again.
const findBacklogsInterval = time.Second

// findBacklogsEvery keeps the backlogs current until the store closes.
func (d *DB) findBacklogsEvery(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-t.C:
			_ = d.findBacklogs() // a failing store is reported by its writes; the old set stays
		}
	}
}
