package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// A flush of one queue's writes — its log entry and bodies, a deletion and its applied index —
// makes one sstable per key kind: none spans from the applied indexes to the Raft logs, over
// every queue's bodies, and the stats report the tables and the flush.
func TestNoSSTableHoldsTwoKindsOfKeys(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	ids := []ID{{1}, {2}, {3}}
	storeEnqueue(t, db, "q", 1, ids, "a", "b", "c")
	b := db.NewBatch("q")
	b.DeleteBody(ids[0])
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	var levels [][]pebble.SSTableInfo
	err := db.Read(func(p *pebble.DB) (err error) {
		if err := p.Flush(); err != nil {
			return err
		}
		levels, err = p.SSTables()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[byte]bool{}
	for _, level := range levels {
		for _, tbl := range level {
			lo, hi := tbl.Smallest.UserKey, tbl.Largest.UserKey
			if lo[0] != hi[0] {
				t.Errorf("table %v holds keys from %q to %q", tbl.FileNum, lo, hi)
			}
			kinds[lo[0]] = true
		}
	}
	for _, kind := range []byte{kindFormat, kindRaft, kindBody, kindApplied} {
		if !kinds[kind] {
			t.Errorf("no table holds keys of kind %q (tables: %v)", kind, levels)
		}
	}
	s, err := db.LSMStats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Tables < int64(len(kinds)) || s.Flushes < 1 || s.Memtables != 1 {
		t.Errorf("stats %+v after a flush of %d tables", s, len(kinds))
	}
}
