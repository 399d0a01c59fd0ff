//go:build linux

package transport

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/internal/testdisk"
	"github.com/filamq/fila/server/storage"
)

// A real disk that fills up: Enqueues are answered StorageError and the server keeps serving
// stats; once space is freed it writes again by itself, and after a restart every acknowledged
// message is there.
func TestFullDiskOnTmpfs(t *testing.T) {
	disk := testdisk.Tmpfs(t, 48)
	dir := filepath.Join(disk, "data")
	open := func() *broker.Broker {
		o := broker.DefaultOptions(dir)
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		o.Storage = storage.Options{MemTableBytes: 4 << 20, CacheBytes: 4 << 20, RecoverInterval: 20 * time.Millisecond}
		b, err := broker.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := open()
	c := dialRaw(t, serveBroker(t, b))
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("first")})
	filler := filepath.Join(disk, "filler")
	testdisk.Fill(t, filler)

	stored := 1
	payload := bytes.Repeat([]byte("x"), 16<<10)
	failed := false
	for i := 0; i < 10_000 && !failed; i++ {
		switch code := tryEnqueue(t, c, uint32(1000+i), "q", payload); code {
		case fibp.CodeOk:
			stored++
		case fibp.CodeStorageError:
			failed = true
		default:
			t.Fatalf("enqueue on a full disk: %v", code)
		}
	}
	if !failed {
		t.Fatal("the disk never filled up")
	}
	for i := range 5 {
		if code := tryEnqueue(t, c, uint32(20_000+i), "q", payload); code != fibp.CodeStorageError {
			t.Fatalf("enqueue while the disk is full: %v", code)
		}
	}
	if b.StorageHealth() == nil {
		t.Fatal("StorageHealth reports writable on a full disk")
	}
	if s := stats(t, c, "q"); s.ErrorCode != fibp.CodeOk {
		t.Fatalf("stats on a full disk: %v", s.ErrorCode)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	untilStored(t, c, "q")
	stored++
	if err := b.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	b = open()
	defer b.Close()
	c = dialRaw(t, serveBroker(t, b))
	c.Handshake()
	if s := stats(t, c, "q"); s.ErrorCode != fibp.CodeOk || s.Depth < uint64(stored) {
		t.Fatalf("after a restart the queue holds %d messages; %d were acknowledged", s.Depth, stored)
	}
}

// A start on a full disk fails at once with an error that says so.
func TestStartOnFullDiskFailsClearly(t *testing.T) {
	disk := testdisk.Tmpfs(t, 8)
	dir := filepath.Join(disk, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testdisk.Fill(t, filepath.Join(disk, "filler"))
	o := broker.DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(o)
	if err == nil {
		b.Close()
		t.Fatal("opened a broker on a full disk")
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("start on a full disk: %v, want an error naming ENOSPC", err)
	}
	t.Log(err)
}

// Many queues writing at once when the disk fills up: no panic, no write stuck inside Pebble;
// every writer sees StorageError and writes again once space is freed.
func TestFullDiskUnderConcurrentWrites(t *testing.T) {
	t.Run("reserve", func(t *testing.T) { fullDiskUnderConcurrentWrites(t, 0) })
	// A reserve too small for the writes in progress: Pebble's own error path.
	t.Run("tiny-reserve", func(t *testing.T) { fullDiskUnderConcurrentWrites(t, 64<<10) })
}

func fullDiskUnderConcurrentWrites(t *testing.T, reserve int64) {
	disk := testdisk.Tmpfs(t, 64)
	dir := filepath.Join(disk, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o := broker.DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Storage = storage.Options{MemTableBytes: 4 << 20, CacheBytes: 4 << 20, RecoverInterval: 20 * time.Millisecond, ReserveBytes: reserve}
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := serveBroker(t, b)
	const writers = 8
	clients := make([]*rawClient, writers)
	for i := range clients {
		clients[i] = dialRaw(t, addr)
		clients[i].Handshake()
		newQueue(t, clients[i], &fibp.CreateQueue{Name: string(rune('a' + i))})
	}
	filler := filepath.Join(disk, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	// Leave a few MiB free so that the writers fill the disk together.
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(disk, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	if _, err := f.Write(make([]byte, free-4<<20)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	payload := bytes.Repeat([]byte("y"), 8<<10)
	done := make(chan fibp.ErrorCode, writers)
	for i, c := range clients {
		go func() {
			for n := 0; n < 100_000; n++ {
				code := tryEnqueue(t, c, uint32(1000+n), string(rune('a'+i)), payload)
				if code != fibp.CodeOk {
					done <- code
					return
				}
			}
			done <- fibp.CodeOk
		}()
	}
	for range writers {
		if code := <-done; code != fibp.CodeStorageError {
			t.Fatalf("a writer on a filling disk stopped with %v, want StorageError", code)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		untilStored(t, c, string(rune('a'+i)))
	}
}
