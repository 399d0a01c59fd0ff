package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// testID is a UUIDv7-shaped ID accepted at ms, the n-th of that millisecond.
func testID(ms time.Time, n uint64) (id ID) {
	binary.BigEndian.PutUint64(id[0:8], uint64(ms.UnixMilli())<<16|0x7000|n&0xfff)
	binary.BigEndian.PutUint64(id[8:16], n)
	return id
}

// A flush of a queue with a standing backlog — acks deleting its oldest bodies, enqueues adding
// new ones — and of the queues on either side of it writes no sstable that spans the backlog's
// untouched bodies in between: a compaction of such a table would rewrite every one of them. A
// queue without a standing backlog shares its sstables with its neighbours, as before.
func TestAFlushDoesNotSpanAStandingBacklog(t *testing.T) {
	db, err := Open(t.TempDir(), Options{backlogMessages: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := time.Now().Add(-time.Hour)
	const stored = 2000
	backlog := make([]ID, stored)
	payloads := make([]string, stored)
	for i := range backlog {
		backlog[i], payloads[i] = testID(old, uint64(i)), fmt.Sprint(i)
	}
	storeEnqueue(t, db, "m", 1, backlog, payloads...)
	compactAll(t, db)
	db.Stored("a", 1)
	db.Stored("m", stored)
	db.Stored("z", 999)

	now := time.Now()
	storeEnqueue(t, db, "a", 1, []ID{testID(now, 1)}, "a1")
	storeEnqueue(t, db, "z", 1, []ID{testID(now, 1)}, "z1")
	storeEnqueue(t, db, "m", 2, []ID{testID(now, 1), testID(now, 2)}, "new1", "new2")
	b := db.NewBatch("m")
	for _, id := range backlog[:10] {
		b.DeleteBody(id)
	}
	if err := b.Commit(2); err != nil {
		t.Fatal(err)
	}
	untouched := bodyKey(nil, "m", backlog[stored/2])
	l0 := flushedBodies(t, db)
	for _, tbl := range l0 {
		lo, hi := tbl.Smallest.UserKey, tbl.Largest.UserKey
		if bytes.Compare(lo, untouched) <= 0 && bytes.Compare(untouched, hi) <= 0 {
			t.Errorf("flushed table %v holds bodies from %q to %q, over m's untouched backlog", tbl.FileNum, lo, hi)
		}
	}
	// a; m's acked head; m's new tail; z.
	if len(l0) != 4 {
		t.Errorf("the flush wrote %d body tables, want 4 (a, m's head, m's tail, z): %v", len(l0), l0)
	}
}

// Without a standing backlog the bodies of every queue share a flush's sstable.
func TestQueuesWithoutABacklogShareSSTables(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	now := time.Now()
	for i, q := range []string{"a", "m", "z"} {
		storeEnqueue(t, db, q, 1, []ID{testID(now, uint64(i))}, q)
	}
	if l0 := flushedBodies(t, db); len(l0) != 1 {
		t.Errorf("the flush wrote %d body tables, want 1: %v", len(l0), l0)
	}
}

// A queue has a standing backlog from backlogMessages stored messages until it holds fewer than
// half of that, or is dropped.
func TestStandingBacklogs(t *testing.T) {
	db, err := Open(t.TempDir(), Options{backlogMessages: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, step := range []struct {
		queue    string
		messages int
		want     []string
	}{
		{"q", 99, []string{}}, {"q", 100, []string{"q"}}, {"a", 500, []string{"a", "q"}}, {"q", 50, []string{"a", "q"}},
		{"q", 49, []string{"a"}}, {"q", 99, []string{"a"}}, {"q", 1000, []string{"a", "q"}},
	} {
		db.Stored(step.queue, step.messages)
		if got := *db.spans.backlogs.Load(); !slices.Equal(got, step.want) {
			t.Fatalf("after %s holds %d: backlogs %q, want %q", step.queue, step.messages, got, step.want)
		}
	}
	if err := db.DropQueue("q"); err != nil {
		t.Fatal(err)
	}
	if got := *db.spans.backlogs.Load(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after q was dropped: backlogs %q, want [a]", got)
	}
}

// The split's end is past its start for any key, and nil only where the kind's end is meant.
func TestSplitEndsPastItsStart(t *testing.T) {
	s := newSplitter(1, 32<<20)
	s.stored("m", 1)
	s.stored("q", 1)
	s.memtables.add(time.Now())
	for _, start := range [][]byte{
		{kindBody}, []byte("bm"), []byte("bm\x00"), []byte("bm\x00\x01"), bodyKey(nil, "m", testID(time.Now(), 1)),
		bodyKey(nil, "m", ID{}), bodyKey(nil, "m", ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), []byte("ba\x00"),
		[]byte("bn\x00\x01"), []byte("bz\x00"), []byte("r"), {0xfe}, bodyKey(nil, "q", ID{1}),
	} {
		_, end, err := s.split(start)
		if err != nil {
			t.Fatal(err)
		}
		if end != nil && bytes.Compare(start, end) >= 0 {
			t.Errorf("split(%q) ended at %q, not past it", start, end)
		}
	}
}

// flushedBodies flushes the memtable and returns the level-0 tables that hold bodies.
func flushedBodies(t *testing.T, db *DB) []pebble.SSTableInfo {
	t.Helper()
	var bodies []pebble.SSTableInfo
	err := db.Read(func(p *pebble.DB) error {
		if err := p.Flush(); err != nil {
			return err
		}
		levels, err := p.SSTables()
		if err != nil {
			return err
		}
		for _, tbl := range levels[0] {
			if tbl.Smallest.UserKey[0] == kindBody {
				bodies = append(bodies, tbl)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

func compactAll(t *testing.T, db *DB) {
	t.Helper()
	err := db.Read(func(p *pebble.DB) error {
		if err := p.Flush(); err != nil {
			return err
		}
		return p.Compact(context.Background(), []byte{0}, []byte{0xff}, false)
	})
	if err != nil {
		t.Fatal(err)
	}
}
