package transport

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/storage"
)

// serveBroker serves b on loopback until the test ends.
func serveBroker(t *testing.T, b *broker.Broker) string {
	t.Helper()
	_, addr, stop := listen(t, b, Options{})
	t.Cleanup(stop)
	return addr
}

// tryEnqueue enqueues one message and returns the request's error code (Ok when it was stored).
func tryEnqueue(t *testing.T, c *rawClient, reqID uint32, queue string, payload []byte) fibp.ErrorCode {
	t.Helper()
	switch r := c.Call(reqID, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: queue, Payload: payload}}}).(type) {
	case *fibp.EnqueueResult:
		return r.Results[0].ErrorCode
	case *fibp.Error:
		return r.ErrorCode
	default:
		t.Fatalf("Enqueue answered %#v", r)
		return 0
	}
}

// untilStored retries an enqueue until the broker stores it: the store recovers by itself, on
// its own schedule.
func untilStored(t *testing.T, c *rawClient, queue string) {
	t.Helper()
	for i := 0; ; i++ {
		code := tryEnqueue(t, c, uint32(5000+i), queue, []byte("after"))
		if code == fibp.CodeOk {
			return
		}
		if code != fibp.CodeStorageError {
			t.Fatalf("enqueue while recovering: %v", code)
		}
		if i > 600 {
			t.Fatal("writes did not resume after the disk accepted them again")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A store that refuses writes (the twin told so, as DB does after a failed write): every write
// is answered StorageError, reads and deliveries of a fast queue go on, and once the store takes
// writes again the broker writes again without a restart.
func TestStorageFaultAnswersStorageErrorAndRecovers(t *testing.T) {
	mem := storage.NewMem()
	b, err := broker.Open(broker.Options{Store: mem, Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := dialRaw(t, serveBroker(t, b))
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "fast", DeliveryDurability: fibp.DeliveryDurabilityFast})
	newQueue(t, c, &fibp.CreateQueue{Name: "slow"})
	enqueue(t, c, fibp.EnqueueMessage{Queue: "fast", Payload: []byte("a")}, fibp.EnqueueMessage{Queue: "fast", Payload: []byte("b")})

	// An Enqueue in flight when the disk fails: its append is refused.
	mem.DelayAppends(100 * time.Millisecond)
	c.Send(7, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "slow", Payload: []byte("lost")}}})
	time.Sleep(20 * time.Millisecond) // lets the request reach the queue; either order passes below
	mem.FailWrites(syscall.ENOSPC)
	mem.DelayAppends(0)
	if _, f := c.Next(); !isStorageError(f) {
		t.Fatalf("Enqueue in flight during the failure answered %#v, want StorageError", f)
	}
	if b.StorageHealth() == nil || !errors.Is(b.StorageHealth(), syscall.ENOSPC) {
		t.Fatalf("StorageHealth = %v, want the ENOSPC failure", b.StorageHealth())
	}

	for i, f := range []fibp.Frame{
		&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "fast", Payload: []byte("c")}}},
		&fibp.CreateQueue{Name: "new"},
		&fibp.SetConfig{Key: "fila.default.max_attempts", Value: "3"},
	} {
		if r := c.Call(uint32(10+i), f); !isStorageError(r) {
			t.Fatalf("%v while writes fail answered %#v, want StorageError", f.Opcode(), r)
		}
	}
	// Reads go on: stats, and deliveries of stored messages on a fast queue (no lease is logged).
	if s := stats(t, c, "fast"); s.ErrorCode != fibp.CodeOk || s.Depth != 2 {
		t.Fatalf("stats while writes fail: %+v", s)
	}
	c.Subscribe(20, "fast", 10)
	got := c.Deliveries(2)
	ack := c.Call(21, &fibp.Ack{Items: []fibp.AckItem{{Queue: "fast", MessageID: got[0].MessageID}}})
	if !isStorageError(ack) {
		t.Fatalf("Ack while writes fail answered %#v", ack)
	}

	mem.ResumeWrites()
	untilStored(t, c, "slow")
	untilStored(t, c, "fast")
	if r := c.Call(30, &fibp.CreateQueue{Name: "new"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue after recovery: %v", r.ErrorCode)
	}
	if r := c.Call(31, &fibp.Ack{Items: []fibp.AckItem{{Queue: "fast", MessageID: got[0].MessageID}}}).(*fibp.AckResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("Ack after recovery: %v", r.Results[0])
	}
	if b.StorageHealth() != nil {
		t.Fatalf("StorageHealth after recovery = %v", b.StorageHealth())
	}
}

// A stuck store (a commit failed inside Pebble where no process but a new one gets past it) is
// reported on StorageStuck, which the server exits on; meanwhile every write is answered
// StorageError, also once the disk takes writes again.
func TestStuckStoreIsReportedAndRefusesWrites(t *testing.T) {
	mem := storage.NewMem()
	b, err := broker.Open(broker.Options{Store: mem, Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := dialRaw(t, serveBroker(t, b))
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	select {
	case <-b.StorageStuck():
		t.Fatal("a sound store is reported stuck")
	default:
	}
	mem.Stick(syscall.EIO)
	<-b.StorageStuck()
	mem.ResumeWrites()
	if code := tryEnqueue(t, c, 7, "q", []byte("m")); code != fibp.CodeStorageError {
		t.Fatalf("Enqueue to a stuck store answered %v, want StorageError", code)
	}
	if s := stats(t, c, "q"); s.ErrorCode != fibp.CodeOk {
		t.Fatalf("stats of a stuck store: %+v", s)
	}
}

func isStorageError(f fibp.Frame) bool {
	switch r := f.(type) {
	case *fibp.Error:
		return r.ErrorCode == fibp.CodeStorageError
	case *fibp.EnqueueResult:
		return len(r.Results) > 0 && r.Results[0].ErrorCode == fibp.CodeStorageError
	case *fibp.CreateQueueResult:
		return r.ErrorCode == fibp.CodeStorageError
	case *fibp.SetConfigResult:
		return r.ErrorCode == fibp.CodeStorageError
	case *fibp.AckResult:
		return len(r.Results) > 0 && r.Results[0].ErrorCode == fibp.CodeStorageError
	}
	return false
}

// smallDisk mounts a tmpfs of size bytes for the test, or skips it where mounting is not
// possible (not root, no mount(8)).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes zeros to path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// A real disk that fills up: Enqueues are answered StorageError and the server keeps serving
// stats; once space is freed it writes again by itself, and after a restart every acknowledged
// message is there.
func TestFullDiskOnTmpfs(t *testing.T) {
	disk := smallDisk(t, "48m")
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
	fill(t, filler)

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
	disk := smallDisk(t, "8m")
	dir := filepath.Join(disk, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(disk, "filler"))
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
	disk := smallDisk(t, "64m")
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
