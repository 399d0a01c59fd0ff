package storage

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
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

func TestBodiesAndAppliedIndexSurviveReopen(t *testing.T) {
	db, dir := openTemp(t)
	b := db.NewBatch("orders")
	ids := []ID{{1}, {2}, {3}}
	for i, id := range ids {
		b.PutBody(id, map[string]string{"k": "v"}, []byte{byte(i)})
	}
	if err := b.Commit(7); err != nil {
		t.Fatal(err)
	}
	b.DeleteBody(ids[2])
	if err := b.Commit(8); err != nil {
		t.Fatal(err)
	}
	b.Close()
	other := db.NewBatch("orders2") // shares a prefix with orders
	other.PutBody(ID{9}, nil, []byte("other"))
	if err := other.Commit(1); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.Applied("orders"); err != nil || n != 8 {
		t.Fatalf("applied: %d, %v", n, err)
	}
	got, err := db.ReadBody("orders", ids[1])
	if err != nil || !cmp.Equal(got, Body{Headers: map[string]string{"k": "v"}, Payload: []byte{1}}) {
		t.Fatalf("body: %+v, %v", got, err)
	}
	if _, err := db.ReadBody("orders", ids[2]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted body: %v", err)
	}
	var seen []int
	err = db.ReadBodies("orders", []ID{{0}, ids[0], ids[1], ids[2], {9}}, func(i int, _ map[string]string, p []byte) {
		seen = append(seen, i)
	})
	if err != nil || !cmp.Equal(seen, []int{1, 2}) {
		t.Fatalf("ReadBodies saw %v, %v", seen, err)
	}
}

func TestDropQueueRemovesOnlyThatGroup(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	for _, q := range []string{"a", "ab"} {
		b := db.NewBatch(q)
		b.PutBody(ID{1}, nil, []byte(q))
		if err := b.Commit(3); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if err := db.Pebble().Set(append(QueueRaftPrefix(q), 'L'), []byte("x"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
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
	if n, _ := db.Applied("a"); n != 0 {
		t.Fatalf("applied index survived the drop: %d", n)
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
