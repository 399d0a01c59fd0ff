package transport

import (
	"errors"
	"io"
	"log/slog"
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
