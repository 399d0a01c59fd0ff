//go:build linux

package transport

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/internal/testdisk"
	"github.com/filamq/fila/server/offheap"
	"github.com/filamq/fila/server/storage"
)

// A real disk filled by a growing backlog whose records are in scratch files (as fila-server
// runs it): the scratch regions stop short of the store's reserve, the store meets the full disk
// and Enqueues are answered StorageError, nothing faults; once space is freed writes resume.
func TestFullDiskWithScratchAnswersStorageError(t *testing.T) {
	if underRace {
		// The queue whose round failed reloads its backlog from the log before it answers
		// again: tens of seconds under the race detector, past the raw client's deadline (fibptest.ReadWait).
		// The scratch code itself is raced in server/engine.
		t.Skip("too slow under the race detector")
	}
	disk := testdisk.Ext4(t, 64)
	dir := filepath.Join(disk, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o := broker.DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Storage = storage.Options{MemTableBytes: 1 << 20, CacheBytes: 1 << 20, ReserveBytes: 2 << 20,
		RecoverInterval: 20 * time.Millisecond}
	keep := o.Storage.ReserveSize()
	alloc := offheap.New(offheap.Options{Logger: o.Logger})
	if err := alloc.OpenScratch(filepath.Join(dir, "scratch"), keep); err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	o.Allocator = alloc
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, addr, stop := listen(t, b, Options{})
	defer stop() // before b.Close
	c := dialRaw(t, addr)
	defer c.NC.Close()
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	newQueue(t, c, &fibp.CreateQueue{Name: "other"})

	payload := bytes.Repeat([]byte("x"), 64)
	batch := make([]fibp.EnqueueMessage, 1000)
	for i := range batch {
		batch[i] = fibp.EnqueueMessage{Queue: "q", Payload: payload}
	}
	// enqueueBatch enqueues batch and reports whether every message was stored; any answer but
	// Ok and StorageError fails the test.
	enqueueBatch := func(id uint32) bool {
		f := c.Call(id, &fibp.Enqueue{Messages: batch})
		if isStorageError(f) {
			return false
		}
		r, ok := f.(*fibp.EnqueueResult)
		if !ok {
			t.Fatalf("Enqueue %d answered %#v", id, f)
		}
		stored := true
		for _, res := range r.Results {
			switch res.ErrorCode {
			case fibp.CodeOk:
			case fibp.CodeStorageError:
				stored = false
			default:
				t.Fatalf("enqueue on a filling disk: %v", res.ErrorCode)
			}
		}
		return stored
	}
	for i := range 10 { // 10,000 messages: record chunks past the first, scratch regions
		if !enqueueBatch(uint32(1000 + i)) {
			t.Fatal("StorageError before the disk filled")
		}
	}
	if alloc.Stats().Scratch == 0 {
		t.Fatal("the backlog's records are not in scratch regions")
	}
	// Leave the disk 1 MiB beyond what the scratch regions keep free, and keep enqueueing.
	filler := filepath.Join(disk, "filler")
	testdisk.Fill(t, filler)
	if err := os.Truncate(filler, max(0, fileSize(t, filler)-keep-1<<20)); err != nil {
		t.Fatal(err)
	}
	before := alloc.Stats().Fallbacks
	full := false
	for i := 0; i < 2000 && !full; i++ {
		full = !enqueueBatch(uint32(2000 + i))
	}
	if !full {
		t.Fatal("the disk never filled up")
	}
	if alloc.Stats().Fallbacks == before {
		t.Fatal("scratch regions were made into the space kept for the store")
	}
	// The store probes the disk every 20 ms and may have found room meanwhile (Pebble deletes
	// the files it no longer needs): take what is left, so that the disk stays full until the
	// fillers go. A store that took writes again meets the full disk at its next write.
	rest := filepath.Join(disk, "rest")
	testdisk.Fill(t, rest)
	for i := 0; b.StorageHealth() == nil; i++ {
		if i == 100 {
			t.Fatal("StorageHealth reports writable on a full disk")
		}
		enqueueBatch(uint32(7000 + i))
	}
	if code := tryEnqueue(t, c, 9000, "q", payload); code != fibp.CodeStorageError {
		t.Fatalf("enqueue while the disk is full: %v", code)
	}
	for _, f := range []string{filler, rest} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	// Another queue writes again at once; q, whose round failed, first reloads its backlog from
	// the log (seconds under the race detector).
	untilStored(t, c, "other")
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
