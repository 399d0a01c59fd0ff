package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/store"
)

func TestLogRoundTripsEveryField(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	s := newStore(t, db, "g\x00")
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.UTC)
	want := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("configuration")},
		{Index: 2, Term: 7, Type: raft.LogNoop, AppendedAt: at},
		{Index: 3, Term: 7, Type: raft.LogCommand, Data: bytes.Repeat([]byte{0xAB}, 1<<16),
			Extensions: []byte("ext"), AppendedAt: at.Add(time.Nanosecond)},
		{Index: 4, Term: math.MaxUint64, Type: raft.LogBarrier, Extensions: []byte{0}},
		{Index: 5, Term: 8, Type: raft.LogType(200), Data: []byte{}, AppendedAt: time.Unix(0, -1)},
		{Index: math.MaxUint64, Term: 9, Type: raft.LogCommand, Data: []byte("last")},
	}
	if err := s.StoreLogs(want); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		for _, w := range want {
			var got raft.Log
			if err := s.GetLog(w.Index, &got); err != nil {
				t.Fatalf("GetLog(%d): %v", w.Index, err)
			}
			exp := *w
			if len(exp.Data) == 0 {
				exp.Data = nil // empty byte fields come back nil
			}
			if diff := cmp.Diff(exp, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("log %d (-want +got):\n%s", w.Index, diff)
			}
			if cap(got.Data) != len(got.Data) {
				t.Errorf("log %d: Data has spare capacity %d: an append would overwrite Extensions", w.Index, cap(got.Data))
			}
		}
	}
	check(s)
	checkBounds(t, s, 1, math.MaxUint64)

	// The returned bytes are copies: they survive the value being overwritten and flushed.
	var kept raft.Log
	if err := s.GetLog(3, &kept); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(&raft.Log{Index: 3, Term: 7, Data: bytes.Repeat([]byte{0xCD}, 1<<16)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept.Data, want[2].Data) || string(kept.Extensions) != "ext" {
		t.Fatal("a returned log changed when its stored value was overwritten")
	}
	if err := s.StoreLog(want[2]); err != nil {
		t.Fatal(err)
	}

	// And everything survives reopening the database.
	closeDB(t, db)
	db = openDB(t, dir)
	s = newStore(t, db, "g\x00")
	check(s)
	checkBounds(t, s, 1, math.MaxUint64)
}

func TestBounds(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	s := newStore(t, db, "q/orders\x00")
	checkBounds(t, s, 0, 0)

	if err := s.StoreLogs(entries(1, 100)); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 1, 100)
	if err := s.StoreLogs(nil); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 1, 100)

	steps := []struct {
		min, max    uint64
		first, last uint64
	}{
		{1, 10, 11, 100},   // a prefix, as compaction after a snapshot deletes
		{91, 100, 11, 90},  // a suffix, as a follower deletes conflicting entries
		{40, 50, 11, 90},   // the middle: bounds unchanged
		{0, 5, 11, 90},     // below the log: nothing
		{200, 300, 11, 90}, // above the log: nothing
		{5, 20, 21, 90},    // overlapping the start
		{30, 45, 21, 90},   // overlapping the hole
		{21, 29, 51, 90},   // up to the hole: the first index jumps over it
		{60, 1000, 51, 59}, // past the end
		{51, 59, 0, 0},     // everything
		{1, 1000, 0, 0},    // on an empty log
		{100, 99, 0, 0},    // an empty range
		{0, math.MaxUint64, 0, 0},
	}
	for _, st := range steps {
		if err := s.DeleteRange(st.min, st.max); err != nil {
			t.Fatal(err)
		}
		checkBounds(t, s, st.first, st.last)
		// The cache agrees with a fresh scan.
		checkBounds(t, newStore(t, db, "q/orders\x00"), st.first, st.last)
	}

	// A log restarted after a gap (as raft does after restoring a snapshot).
	if err := s.StoreLogs(entries(500, 510)); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 500, 510)
	if err := s.StoreLogs(entries(520, 520)); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 500, 520)
	if err := s.DeleteRange(505, math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 500, 504)

	closeDB(t, db)
	db = openDB(t, dir)
	checkBounds(t, newStore(t, db, "q/orders\x00"), 500, 504)
}

func TestGetLogMissing(t *testing.T) {
	s := newStore(t, openDB(t, t.TempDir()), "g\x00")
	var l raft.Log
	// raft compares with ==, not errors.Is (replication.go).
	if err := s.GetLog(1, &l); err != raft.ErrLogNotFound {
		t.Fatalf("empty log: %v, want raft.ErrLogNotFound", err)
	}
	if err := s.StoreLogs(entries(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(2, 2); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{0, 2, 4} {
		if err := s.GetLog(i, &l); err != raft.ErrLogNotFound {
			t.Fatalf("GetLog(%d): %v, want raft.ErrLogNotFound", i, err)
		}
	}
}

func TestGroupsDoNotSeeEachOther(t *testing.T) {
	db := openDB(t, t.TempDir())
	a := newStore(t, db, "r/a\x00")
	b := newStore(t, db, "r/b\x00")
	if err := a.StoreLogs(entries(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogs(entries(100, 105)); err != nil {
		t.Fatal(err)
	}
	must(t, a.SetUint64([]byte("CurrentTerm"), 3))
	must(t, b.SetUint64([]byte("CurrentTerm"), 9))
	checkBounds(t, a, 1, 10)
	checkBounds(t, b, 100, 105)
	var l raft.Log
	if err := a.GetLog(100, &l); err != raft.ErrLogNotFound {
		t.Fatalf("group a reads group b's log: %v", err)
	}
	if n, _ := a.GetUint64([]byte("CurrentTerm")); n != 3 {
		t.Fatalf("group a's term is %d", n)
	}

	// Deleting all of a's log leaves b's.
	must(t, a.DeleteRange(0, math.MaxUint64))
	checkBounds(t, a, 0, 0)
	checkBounds(t, newStore(t, db, "r/b\x00"), 100, 105)

	// Dropping b removes its log and stable keys, and nothing of a's.
	must(t, a.StoreLogs(entries(1, 2)))
	must(t, DropGroup(Pebble(db), []byte("r/b\x00"), Options{}))
	b = newStore(t, db, "r/b\x00")
	checkBounds(t, b, 0, 0)
	if _, err := b.GetUint64([]byte("CurrentTerm")); err != ErrKeyNotFound {
		t.Fatalf("dropped group's term: %v", err)
	}
	checkBounds(t, newStore(t, db, "r/a\x00"), 1, 2)
	if n, _ := a.GetUint64([]byte("CurrentTerm")); n != 3 {
		t.Fatalf("group a's term is %d after dropping b", n)
	}
}

func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	s := newStore(t, db, "g\x00")

	// raft recognises a missing key by this exact text (api.go, raft.go).
	if v, err := s.Get([]byte("LastVoteCand")); err == nil || err.Error() != "not found" || v != nil {
		t.Fatalf("Get missing: %q, %v", v, err)
	}
	if n, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" || n != 0 {
		t.Fatalf("GetUint64 missing: %d, %v", n, err)
	}

	must(t, s.Set([]byte("LastVoteCand"), []byte("node-1")))
	must(t, s.Set([]byte("empty"), nil))
	must(t, s.SetUint64([]byte("CurrentTerm"), 1))
	must(t, s.SetUint64([]byte("CurrentTerm"), math.MaxUint64)) // overwrite
	must(t, s.SetUint64([]byte("LastVoteTerm"), 0))
	must(t, s.Set([]byte("short"), []byte{1, 2, 3}))

	check := func(s *Store) {
		t.Helper()
		if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-1" {
			t.Fatalf("Get: %q, %v", v, err)
		}
		if v, err := s.Get([]byte("empty")); err != nil || v == nil || len(v) != 0 {
			t.Fatalf("Get of an empty value: %#v, %v", v, err)
		}
		if n, err := s.GetUint64([]byte("CurrentTerm")); err != nil || n != math.MaxUint64 {
			t.Fatalf("GetUint64: %d, %v", n, err)
		}
		if n, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || n != 0 {
			t.Fatalf("GetUint64 of 0: %d, %v", n, err)
		}
		if _, err := s.GetUint64([]byte("short")); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("GetUint64 of 3 bytes: %v, want ErrCorrupt", err)
		}
	}
	check(s)
	// Stable keys are not log entries.
	checkBounds(t, s, 0, 0)

	closeDB(t, db)
	db = openDB(t, dir)
	check(newStore(t, db, "g\x00"))
}

func TestCorruptValuesNameGroupAndIndex(t *testing.T) {
	db := openDB(t, t.TempDir())
	s := newStore(t, db, "q/orders\x00")
	must(t, s.StoreLogs(entries(1, 3)))
	other := (&store.RaftLogRecord{Index: 9}).AppendTo([]byte{byte(store.OpRaftLogRecord)})
	for name, val := range map[string][]byte{
		"empty":        {},
		"other record": {byte(store.OpQueueRecord), 0, 0},
		"truncated":    {byte(store.OpRaftLogRecord), 0, 0, 0},
		"wrong index":  other,
	} {
		must(t, db.Set(s.logKey(nil, 2), val, pebble.Sync))
		var l raft.Log
		err := s.GetLog(2, &l)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"q/orders\x00"`) ||
			!strings.Contains(err.Error(), "log 2") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A key of the wrong length in the log range fails the scan on open.
	must(t, db.Set(append(s.logKey(nil, 5), 0), nil, pebble.Sync))
	if _, err := New(Pebble(db), []byte("q/orders\x00"), Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("New over a bad key: %v", err)
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	db := openDB(t, t.TempDir())
	if _, err := New(Pebble(db), nil, Options{}); err == nil {
		t.Fatal("New accepted an empty prefix")
	}
	if _, err := New(nil, []byte("g"), Options{}); err == nil {
		t.Fatal("New accepted a nil database")
	}
	if err := DropGroup(Pebble(db), nil, Options{}); err == nil {
		t.Fatal("DropGroup accepted an empty prefix")
	}
	// The prefix is copied.
	p := []byte("g\x00")
	s, err := New(Pebble(db), p, Options{NoSync: true})
	must(t, err)
	p[0] = 'x'
	if string(s.Prefix()) != "g\x00" {
		t.Fatalf("prefix %q follows the caller's slice", s.Prefix())
	}
	must(t, s.StoreLogs(entries(1, 1))) // NoSync works too
	checkBounds(t, newStore(t, db, "g\x00"), 1, 1)
}

func TestHasExistingState(t *testing.T) {
	s := newStore(t, openDB(t, t.TempDir()), "g\x00")
	snaps := raft.NewInmemSnapshotStore()
	if has, err := raft.HasExistingState(s, s, snaps); err != nil || has {
		t.Fatalf("fresh store: %v, %v", has, err)
	}
	conf := fastConfig("n1")
	_, trans := raft.NewInmemTransport("n1")
	cfg := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "n1"}}}
	must(t, raft.BootstrapCluster(conf, s, s, snaps, trans, cfg))
	if has, err := raft.HasExistingState(s, s, snaps); err != nil || !has {
		t.Fatalf("bootstrapped store: %v, %v", has, err)
	}
	if err := raft.BootstrapCluster(conf, s, s, snaps, trans, cfg); err != raft.ErrCantBootstrap {
		t.Fatalf("second bootstrap: %v", err)
	}
	checkBounds(t, s, 1, 1)
}

func TestFaulty(t *testing.T) {
	s := newStore(t, openDB(t, t.TempDir()), "g\x00")
	f := NewFaulty(s)
	must(t, f.StoreLogs(entries(1, 1)))

	boom := errors.New("boom")
	f.FailNext(2, boom)
	for i := 0; i < 2; i++ {
		if err := f.StoreLogs(entries(2, 2)); err != boom {
			t.Fatalf("call %d: %v, want boom", i, err)
		}
	}
	checkBounds(t, s, 1, 1) // a failed call writes nothing
	must(t, f.StoreLogs(entries(2, 2)))

	f.FailAll(nil)
	for i := 0; i < 3; i++ {
		if err := f.StoreLog(entries(3, 3)[0]); err != ErrInjected {
			t.Fatalf("FailAll call %d: %v", i, err)
		}
	}
	f.Clear()
	must(t, f.StoreLogs(entries(3, 3)))
	f.FailNext(0, boom) // same as Clear
	must(t, f.StoreLogs(entries(4, 4)))

	f.FailNextAfterStoring(1, boom)
	if err := f.StoreLogs(entries(5, 5)); err != boom {
		t.Fatalf("FailNextAfterStoring: %v, want boom", err)
	}
	var l raft.Log
	must(t, s.GetLog(5, &l)) // stored although the call failed
	must(t, f.StoreLogs(entries(6, 6)))
	if f.Failed() != 6 {
		t.Fatalf("Failed() = %d, want 6", f.Failed())
	}
	checkBounds(t, s, 1, 6)

	// Everything else passes through.
	must(t, f.SetUint64([]byte("k"), 7))
	if n, err := s.GetUint64([]byte("k")); err != nil || n != 7 {
		t.Fatalf("through Faulty: %d, %v", n, err)
	}
	must(t, f.DeleteRange(1, 2))
	if first, _ := f.FirstIndex(); first != 3 {
		t.Fatalf("FirstIndex through Faulty: %d", first)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentUse stores, compacts and reads one group from several goroutines at once, as
// raft's main, snapshot and metrics goroutines do, and checks that the cached bounds end up
// where a fresh scan finds them.
func TestConcurrentUse(t *testing.T) {
	db := openDB(t, t.TempDir())
	s := newStore(t, db, "g\x00")
	const last = 2000
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the main goroutine: appends
		defer close(done)
		for i := uint64(1); i <= last; i += 20 {
			if err := s.StoreLogs(entries(i, i+19)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() { // the snapshot goroutine: compacts, keeping 100 entries
		for {
			select {
			case <-done:
				return
			default:
			}
			first, _ := s.FirstIndex()
			l, _ := s.LastIndex()
			if first > 0 && l > first+100 {
				if err := s.DeleteRange(first, l-100); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	for range 2 { // readers
		wg.Go(func() {
			var l raft.Log
			for {
				select {
				case <-done:
					return
				default:
				}
				first, _ := s.FirstIndex()
				if err := s.GetLog(first, &l); err != nil && err != raft.ErrLogNotFound {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if l != last {
		t.Fatalf("last index %d, want %d", l, last)
	}
	checkBounds(t, newStore(t, db, "g\x00"), f, l)
}

// TestGoldenLayout pins the bytes on disk: a key and value written by StoreLogs and a stable
// key written by SetUint64, one commented line per field.
func TestGoldenLayout(t *testing.T) {
	db := openDB(t, t.TempDir())
	s := newStore(t, db, "r/q\x00")
	must(t, s.StoreLog(&raft.Log{Index: 7, Term: 2, Type: raft.LogCommand, Data: []byte("abc"),
		Extensions: []byte{0xEE}, AppendedAt: time.Unix(0, 1700000000000000000)}))
	must(t, s.SetUint64([]byte("CurrentTerm"), 2))

	golden := []struct{ key, val string }{{
		key: "722f7100" + // the group prefix "r/q\x00"
			"6c" + // 'l': a log entry
			"0000000000000007", // index 7
		val: "06" + // opcode: RaftLogRecord
			"0000000000000007" + // index
			"0000000000000002" + // term
			"00" + // type: LogCommand
			"00000003" + "616263" + // data "abc"
			"00000001" + "ee" + // extensions
			"17979cfe362a0000", // appended_at: 1700000000000000000 ns
	}, {
		key: "722f7100" + // the group prefix
			"73" + // 's': a stable key
			"43757272656e745465726d", // "CurrentTerm"
		val: "0000000000000002", // a big-endian uint64
	}}
	it, err := db.NewIter(nil)
	must(t, err)
	defer it.Close()
	i := 0
	for it.First(); it.Valid(); it.Next() {
		if i == len(golden) {
			t.Fatalf("unexpected key %x", it.Key())
		}
		if got := fmt.Sprintf("%x", it.Key()); got != golden[i].key {
			t.Errorf("key %d: %s, want %s", i, got, golden[i].key)
		}
		if got := fmt.Sprintf("%x", it.Value()); got != golden[i].val {
			t.Errorf("value %d: %s, want %s", i, got, golden[i].val)
		}
		i++
	}
	if i != len(golden) {
		t.Fatalf("%d keys, want %d", i, len(golden))
	}
}
