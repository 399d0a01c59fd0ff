package storage

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/filamq/fila/generated/store"
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

func TestQueuesMessagesAndStateSurviveReopen(t *testing.T) {
	db, dir := openTemp(t)
	b := db.NewBatch()
	b.PutQueue(&store.QueueRecord{Name: "orders", VisibilityTimeoutMs: 5000})
	b.PutQueue(&store.QueueRecord{Name: "orders.dlq", DLQOf: "orders"})
	b.PutQueue(&store.QueueRecord{Name: "orders2"}) // shares a prefix with orders
	ids := []ID{{1}, {2}, {3}}
	for i, id := range ids {
		b.PutMessage("orders", id, &store.MessageRecord{Payload: []byte{byte(i)}, FairnessKey: "k", Weight: 1, EnqueuedAt: 10})
	}
	b.PutMessage("orders2", ID{9}, &store.MessageRecord{Payload: []byte("other")})
	b.PutState("orders", ids[1], &store.StateRecord{Attempts: 2, LastError: "boom"})
	b.PutState("orders", ID{0}, &store.StateRecord{Attempts: 7}) // orphan state: ignored
	b.PutConfig("fila.quantum", "3")
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b = db.NewBatch()
	b.DeleteMessage("orders", ids[2], false)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	qs, err := db.Queues()
	if err != nil || len(qs) != 3 || qs[0].Name != "orders" || qs[0].VisibilityTimeoutMs != 5000 || qs[1].DLQOf != "orders" {
		t.Fatalf("queues: %+v, %v", qs, err)
	}
	var got []StoredMessage
	if err := db.Messages("orders", func(m StoredMessage) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []StoredMessage{
		{ID: ids[0], Body: store.MessageRecord{Payload: []byte{0}, FairnessKey: "k", Weight: 1, EnqueuedAt: 10}},
		{ID: ids[1], Body: store.MessageRecord{Payload: []byte{1}, FairnessKey: "k", Weight: 1, EnqueuedAt: 10}, State: &store.StateRecord{Attempts: 2, LastError: "boom"}},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	var body store.MessageRecord
	done, err := db.ReadMessage("orders", ids[1], &body)
	if err != nil || string(body.Payload) != "\x01" {
		t.Fatalf("ReadMessage: %v %q", err, body.Payload)
	}
	done()
	if _, err := db.ReadMessage("orders", ids[2], &body); err != ErrNotFound {
		t.Fatalf("deleted message: %v", err)
	}
	cfg, err := db.Configs()
	if err != nil || cfg["fila.quantum"] != "3" {
		t.Fatalf("configs: %v %v", cfg, err)
	}
}

func TestDeleteQueueRemovesOnlyItsMessages(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	b := db.NewBatch()
	b.PutQueue(&store.QueueRecord{Name: "a"})
	b.PutQueue(&store.QueueRecord{Name: "ab"})
	b.PutMessage("a", ID{1}, &store.MessageRecord{})
	b.PutState("a", ID{1}, &store.StateRecord{Attempts: 1})
	b.PutMessage("ab", ID{1}, &store.MessageRecord{})
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.DeleteQueue("a")
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	count := func(q string) (n int) {
		_ = db.Messages(q, func(StoredMessage) error { n++; return nil })
		return n
	}
	if count("a") != 0 || count("ab") != 1 {
		t.Fatalf("after deleting a: a has %d, ab has %d", count("a"), count("ab"))
	}
	qs, _ := db.Queues()
	if len(qs) != 1 || qs[0].Name != "ab" {
		t.Fatalf("queues: %+v", qs)
	}
}

func TestCorruptRecordIsAnError(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	if err := db.p.Set(queueKey(nil, "x"), []byte{0x02, 1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Queues(); err == nil {
		t.Fatal("a record of the wrong kind decoded as a queue")
	}
}

func TestLeaseLogs(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	b := db.NewBatch()
	b.PutLeaseLog("q", 2, &store.LeaseLogRecord{Leases: []store.LeaseEntry{{Attempts: 1, ExpiresAt: 9, Consumer: "c"}}})
	b.PutLeaseLog("q", 1, &store.LeaseLogRecord{})
	b.PutLeaseLog("q2", 1, &store.LeaseLogRecord{})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	err := db.LeaseLogs("q", func(seq uint64, r *store.LeaseLogRecord) error {
		seqs = append(seqs, seq)
		if seq == 2 && (len(r.Leases) != 1 || r.Leases[0].Consumer != "c") {
			t.Fatalf("log 2: %+v", r)
		}
		return nil
	})
	if err != nil || len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Fatalf("lease logs %v, %v", seqs, err)
	}
	b.DeleteLeaseLog("q", 1)
	b.DeleteQueue("q2")
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	n := 0
	db.LeaseLogs("q", func(uint64, *store.LeaseLogRecord) error { n++; return nil })
	db.LeaseLogs("q2", func(uint64, *store.LeaseLogRecord) error { n++; return nil })
	if n != 1 {
		t.Fatalf("%d lease logs left, want 1", n)
	}
}

// Bodies large enough to be kept in blob files read back the same, through every read path, after
// flushes, deletions and a reopen; a store written without value separation is upgraded on open.
func TestLargeBodiesInBlobFiles(t *testing.T) {
	dir := t.TempDir()
	// A store as an earlier version wrote it: Pebble's defaults, one message.
	old, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	legacy := &DB{p: old}
	b := legacy.NewBatch()
	b.PutMessage("q", ID{0, 0, 1}, &store.MessageRecord{Payload: bytes.Repeat([]byte{'L'}, 1024), Weight: 1})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := legacy.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(dir, Options{MemTableBytes: 256 << 10}) // small memtables: many flushes
	if err != nil {
		t.Fatal(err)
	}
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1024+i%7) }
	const n = 3000
	ids := make([]ID, n)
	for i := range n {
		binary.BigEndian.PutUint64(ids[i][8:], uint64(i+2))
		b := db.NewBatch()
		b.PutMessage("q", ids[i], &store.MessageRecord{Payload: payload(i), FairnessKey: "k", Weight: 1})
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	b = db.NewBatch()
	for i := 0; i < n; i += 2 {
		b.DeleteMessage("q", ids[i], false)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if blobs, _ := filepath.Glob(filepath.Join(dir, "*.blob")); len(blobs) == 0 {
		t.Fatal("no blob files: bodies are not separated")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seen := 0
	err = db.Messages("q", func(m StoredMessage) error {
		if m.ID == (ID{0, 0, 1}) {
			if !bytes.Equal(m.Body.Payload, bytes.Repeat([]byte{'L'}, 1024)) {
				t.Error("the message written before the upgrade changed")
			}
			return nil
		}
		i := int(binary.BigEndian.Uint64(m.ID[8:])) - 2
		if i%2 == 0 || !bytes.Equal(m.Body.Payload, payload(i)) {
			t.Errorf("message %d: deleted or wrong body (%d bytes)", i, len(m.Body.Payload))
		}
		seen++
		return nil
	})
	if err != nil || seen != n/2 {
		t.Fatalf("scanned %d live messages (%v), want %d", seen, err, n/2)
	}
	want := []ID{ids[1], ids[777], ids[2999]}
	got := 0
	err = db.ReadMessages("q", want, func(i int, r *store.MessageRecord) {
		if j := int(binary.BigEndian.Uint64(want[i][8:])) - 2; !bytes.Equal(r.Payload, payload(j)) {
			t.Errorf("read-ahead of message %d: wrong body", j)
		}
		got++
	})
	if err != nil || got != len(want) {
		t.Fatalf("read %d of %d bodies ahead: %v", got, len(want), err)
	}
	var r store.MessageRecord
	done, err := db.ReadMessage("q", ids[1501], &r)
	if err != nil || !bytes.Equal(r.Payload, payload(1501)) {
		t.Fatalf("point read: %v", err)
	}
	done()
}
