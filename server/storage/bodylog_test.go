package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/queuegroup"
)

// groupBodies finds the bodies in a queue group's log entries, as the broker's groups do.
var groupBodies EntryBodies = queuegroup.Bodies{}

// A queue group's log is refused without its EntryBodies: it would keep the bodies inside the
// entries, where nothing that reads bodies looks.
func TestAQueueLogNeedsItsEntryBodies(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	for _, st := range []Store{db, NewMem()} {
		if _, _, err := st.QueueLog("q", nil); !errors.Is(err, errNoEntryBodies) {
			t.Errorf("%T: QueueLog without EntryBodies: %v, want %v", st, err, errNoEntryBodies)
		}
	}
}

// Reading an entry back reads its bodies together, not with a point read each: replaying the log
// of a backlog (a restart) touches the block cache about once per data block, where a Get per
// body looked up the index, filter and data blocks of every table that might hold it, several
// times per message (a million-message queue took 8.9 s to restart instead of 1.6 s). The
// entries are spread over several flushed tables, as a log written over time is, and every body
// comes back.
func TestAnEntrysBodiesAreReadTogether(t *testing.T) {
	db, dir := openTemp(t)
	const entries, perEntry = 8, 500
	for e := range entries {
		ids := make([]ID, perEntry)
		payloads := make([]string, perEntry)
		for i := range ids {
			binary.BigEndian.PutUint64(ids[i][:], uint64(e*perEntry+i+1)) // ascending, as UUIDv7s are
			payloads[i] = fmt.Sprintf("body %d of entry %d", i, e)
		}
		storeEnqueue(t, db, "q", uint64(e+1), ids, payloads...)
		if err := db.p.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs, _, err := db.QueueLog("q", groupBodies)
	if err != nil {
		t.Fatal(err)
	}
	cache := func() int64 { m := db.p.Metrics().BlockCache; return m.Hits + m.Misses }
	before := cache()
	for e := range entries {
		var l raft.Log
		if err := logs.GetLog(uint64(e+1), &l); err != nil {
			t.Fatal(err)
		}
		f, err := queuelog.Decode(queuelog.Opcode(l.Data[4]), l.Data[5:])
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range f.(*queuelog.Enqueue).Messages {
			if want := fmt.Sprintf("body %d of entry %d", i, e); string(m.Payload) != want || m.Headers["k"] != "v" {
				t.Fatalf("entry %d message %d: %q %v, want %q with its header", e, i, m.Payload, m.Headers, want)
			}
		}
	}
	// The entries themselves cost a few lookups each; a Get per body cost at least one per body.
	if got, budget := cache()-before, int64(entries*perEntry/10); got > budget {
		t.Fatalf("reading %d entries of %d messages looked into the block cache %d times, want at most %d", entries, perEntry, got, budget)
	}
}
