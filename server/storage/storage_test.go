package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, dir
}

// storeEnqueue appends a log entry enqueueing one message per payload through the queue's log
// store, which stores the bodies beside the entry.
func storeEnqueue(t interface {
	Helper()
	Fatal(...any)
}, st Store, queue string, index uint64, ids []ID, payloads ...string) {
	t.Helper()
	c := queuelog.Enqueue{At: 1}
	for i, p := range payloads {
		c.Messages = append(c.Messages, queuelog.LogMessage{ID: wire.UUID(ids[i]), FairnessKey: "k", Weight: 1,
			Headers: map[string]string{"k": "v"}, Payload: []byte(p)})
	}
	logs, _, err := st.QueueLog(queue, groupBodies)
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.StoreLogs([]*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: queuelog.AppendFrame(nil, &c)}}); err != nil {
		t.Fatal(err)
	}
}

// Bodies are stored once, beside their entry: the stored entry lacks them, reading it back puts
// back the ones still stored, and an applied Ack deletes them with the applied index.
func testBodies(t *testing.T, st Store, reopen func() Store) {
	ids := []ID{{1}, {2}, {3}}
	storeEnqueue(t, st, "orders", 1, ids, "a", "b", "c")
	storeEnqueue(t, st, "orders2", 1, []ID{{9}}, "other") // shares a prefix with orders
	b := st.NewBatch("orders")
	b.DeleteBody(ids[2])
	if err := b.Commit(8); err != nil {
		t.Fatal(err)
	}
	b.Close()
	st = reopen()
	if n, err := st.Applied("orders"); err != nil || n != 8 {
		t.Fatalf("applied: %d, %v", n, err)
	}
	got, err := st.ReadBody("orders", ids[1])
	if err != nil || !cmp.Equal(got, Body{Headers: map[string]string{"k": "v"}, Payload: []byte("b")}) {
		t.Fatalf("body: %+v, %v", got, err)
	}
	if _, err := st.ReadBody("orders", ids[2]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted body: %v", err)
	}
	var seen []int
	err = st.ReadBodiesLater("orders", []ID{{0}, ids[0], ids[1], ids[2], {9}})(func(i int, _ map[string]string, p []byte) {
		seen = append(seen, i)
	})
	if err != nil || !cmp.Equal(seen, []int{1, 2}) {
		t.Fatalf("ReadBodies saw %v, %v", seen, err)
	}
	logs, _, _ := st.QueueLog("orders", groupBodies)
	var l raft.Log
	if err := logs.GetLog(1, &l); err != nil {
		t.Fatal(err)
	}
	f, err := queuelog.Decode(queuelog.Opcode(l.Data[4]), l.Data[5:])
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for _, m := range f.(*queuelog.Enqueue).Messages {
		payloads = append(payloads, string(m.Payload))
	}
	if !cmp.Equal(payloads, []string{"a", "b", ""}) {
		t.Fatalf("entry read back carries %q; want the bodies still stored", payloads)
	}
}

func TestBodiesAreStoredOnceBesideTheirEntry(t *testing.T) {
	t.Run("pebble", func(t *testing.T) {
		db, dir := openTemp(t)
		testBodies(t, db, func() Store {
			db.Close()
			var err error
			if db, err = Open(dir, Options{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		})
	})
	t.Run("mem", func(t *testing.T) {
		m := NewMem()
		testBodies(t, m, func() Store { return m })
	})
}

func TestDropQueueRemovesOnlyThatGroup(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	for _, q := range []string{"a", "ab"} {
		storeEnqueue(t, db, q, 1, []ID{{1}}, q)
	}
	if qs, err := db.Queues(); err != nil || !cmp.Equal(qs, []string{"a", "ab"}) {
		t.Fatalf("queues %v, %v", qs, err)
	}
	if err := db.DropQueue("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReadBody("a", ID{1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dropped body: %v", err)
	}
	if b, err := db.ReadBody("ab", ID{1}); err != nil || string(b.Payload) != "ab" {
		t.Fatalf("other group's body: %v %v", b, err)
	}
	if qs, err := db.Queues(); err != nil || !cmp.Equal(qs, []string{"ab"}) {
		t.Fatalf("queues after drop %v, %v", qs, err)
	}
}

// A crash of the in-memory twin loses the body deletions made since the last append, as Pebble
// loses its unsynced WAL tail, and keeps everything an append made durable.
func TestMemCrashLosesOnlyWhatNoAppendCovered(t *testing.T) {
	m := NewMem()
	storeEnqueue(t, m, "q", 1, []ID{{1}, {2}}, "a", "b")
	b := m.NewBatch("q")
	b.DeleteBody(ID{1})
	_ = b.Commit(1)
	storeEnqueue(t, m, "q", 2, []ID{{3}}, "c") // covers the first deletion
	b.DeleteBody(ID{2})
	_ = b.Commit(2)
	m.Crash()
	m.Restart()
	for id, want := range map[ID]bool{{1}: false, {2}: true, {3}: true} {
		if _, err := m.ReadBody("q", id); (err == nil) != want {
			t.Errorf("body %v after the crash: %v, want present %v", id[0], err, want)
		}
	}
	if n, _ := m.Applied("q"); n != 1 {
		t.Errorf("applied index after the crash: %d, want 1", n)
	}
}

func TestOldFormatIsRefusedWithOneClearError(t *testing.T) {
	dir := t.TempDir()
	p, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatValueSeparation})
	if err != nil {
		t.Fatal(err)
	}
	// A format-1 store: a queue definition under q<name>, no format marker.
	if err := p.Set([]byte("qorders"), []byte{1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	p.Close()
	_, err = Open(dir, Options{})
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Version != 1 {
		t.Fatalf("want a format-1 FormatError, got %v", err)
	}
	t.Log(err)
}

func TestNewStoreIsMarkedWithItsFormat(t *testing.T) {
	db, dir := openTemp(t)
	db.Close()
	db, err := Open(dir, Options{}) // an empty store that has a marker opens again
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	p, err := pebble.Open(filepath.Clean(dir), &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	v, c, err := p.Get([]byte{kindFormat})
	if err != nil || len(v) != 4 || v[3] != FormatVersion {
		t.Fatalf("marker %x, %v", v, err)
	}
	c.Close()
}

// createSnapshot stores a snapshot of index 100 in a queue group's snapshot store.
func createSnapshot(t *testing.T, snaps raft.SnapshotStore) {
	t.Helper()
	sink, err := snaps.Create(raft.SnapshotVersionMax, 100, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("state of the deleted queue")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// Snapshots of a dropped queue that outlived its log (a store whose snapshot removal a power cut
// undid) are not given to a new queue of the same name: raft would restore the deleted queue
// from them. Those of a group that has its log stay.
func TestSnapshotsWithoutALogAreNotRestored(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	for _, q := range []string{"gone", "kept"} {
		storeEnqueue(t, db, q, 1, []ID{{1}}, q)
		_, snaps, err := db.QueueLog(q, groupBodies)
		if err != nil {
			t.Fatal(err)
		}
		createSnapshot(t, snaps)
	}
	snapDir := db.snapshotDir("gone")
	saved := filepath.Join(t.TempDir(), "saved")
	if err := os.CopyFS(saved, os.DirFS(snapDir)); err != nil {
		t.Fatal(err)
	}
	if err := db.DropQueue("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snapDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DropQueue left the snapshots: %v", err)
	}
	if err := os.CopyFS(snapDir, os.DirFS(saved)); err != nil { // the removal undone
		t.Fatal(err)
	}
	for q, want := range map[string]int{"gone": 0, "kept": 1} {
		_, snaps, err := db.QueueLog(q, groupBodies)
		if err != nil {
			t.Fatal(err)
		}
		if list, err := snaps.List(); err != nil || len(list) != want {
			t.Fatalf("queue %s: %d snapshots (%v), want %d", q, len(list), err, want)
		}
	}
}
