package transport

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/storage"
)

// spinHook spins on messages with a spin header until the hook's time runs out.
const spinHook = `
function on_enqueue(msg)
  if msg.headers.spin then
    local i = 0
    while true do i = i + 1 end
  end
  return {}
end`

// Issue 16, item 6: a queue deleted while Enqueues wait in its inbox answers every one of them
// (QueueNotFound for those it never ran), the producer's connection is released once it closes,
// and the server's shutdown completes.
func TestDeleteQueueAnswersEveryWaitingRequest(t *testing.T) {
	mem := storage.NewMem()
	b, err := broker.Open(broker.Options{Store: mem, Sync: true, InboxSize: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, addr, _ := listen(t, b, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}) // shut down below
	by := startBystander(t, addr)

	admin := dialRaw(t, addr)
	admin.Handshake()
	newQueue(t, admin, &fibp.CreateQueue{Name: "doomed", OnEnqueueScript: wire.Some(spinHook)})
	producer := dialRaw(t, addr)
	producer.Handshake()

	// The queue's hook spins on messages marked so, until its time runs out: while the queue
	// works through a few of them, a burst waits in its inbox, where the queue is deleted.
	const requests = 4000
	one := func(id uint32, headers map[string]string) []byte {
		return fibp.AppendFrame(nil, 0, id, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "doomed", Headers: headers, Payload: []byte("x")}}})
	}
	setConfig(t, admin, "lua.timeout_ms", "1000")
	producer.SendBytes(one(1, map[string]string{"spin": "1"}))
	var burst []byte
	for id := uint32(2); id <= requests; id++ {
		burst = append(burst, one(id, nil)...)
	}
	producer.SendBytes(burst)
	time.Sleep(200 * time.Millisecond) // lets the burst reach the inbox while the hook spins; a short wait only weakens the test
	if r := admin.Call(1000, &fibp.DeleteQueue{Queue: "doomed"}).(*fibp.DeleteQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DeleteQueue: %+v", r)
	}

	codes := map[fibp.ErrorCode]int{}
	answered := map[uint32]bool{}
	for len(answered) < requests {
		h, f := producer.Next()
		switch r := f.(type) {
		case *fibp.EnqueueResult:
			codes[r.Results[0].ErrorCode]++
		case *fibp.Error:
			codes[r.ErrorCode]++
		default:
			t.Fatalf("an Enqueue answered %#v", f)
		}
		if answered[h.RequestID] {
			t.Fatalf("request %d answered twice", h.RequestID)
		}
		answered[h.RequestID] = true
	}
	t.Logf("answers by code: %v", codes)
	if codes[fibp.CodeQueueNotFound] == 0 {
		t.Fatal("no request waited for the deleted queue: the test did not exercise the inbox")
	}

	producer.NC.Close()
	pollUntil(t, "the producer's connection is released", func() bool { return openConns(s) == 2 })
	by.finish()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(time.Minute): // a safety net against a hang, not a measurement
		t.Fatal("Shutdown did not return")
	}
}

// A subscription the broker ends (its queue is deleted) is ended on its connection too: the
// consumer hears QueueNotFound with its Consume's request ID, and the subscription's place and
// its 1 KiB of memory are free again at once. Before, both stayed taken until the connection
// closed, so a consumer whose queues were deleted could not subscribe anywhere else.
func TestSubscriptionsOfADeletedQueueEndOnTheirConnection(t *testing.T) {
	const room = 2
	_, addr := startServer(t, Options{MaxSubscriptions: room,
		MaxConnectionMemory: connMemory + room*subscriptionMemory + subscriptionMemory/2}) // the half: answers queued
	admin := dialRaw(t, addr)
	admin.Handshake()
	for _, q := range []string{"a", "b", "c"} {
		newQueue(t, admin, &fibp.CreateQueue{Name: q})
	}
	c := dialRaw(t, addr)
	c.Handshake()
	c.Subscribe(10, "a", 1)
	c.Subscribe(11, "b", 1)
	for i, q := range []string{"a", "b"} {
		if r := admin.Call(uint32(200+i), &fibp.DeleteQueue{Queue: q}).(*fibp.DeleteQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("DeleteQueue %s: %+v", q, r)
		}
	}
	ended := map[uint32]bool{}
	for len(ended) < room {
		h, f := c.Next()
		expectError(t, f, fibp.CodeQueueNotFound)
		ended[h.RequestID] = true
	}
	if !ended[10] || !ended[11] {
		t.Fatalf("the Error frames name request IDs %v, want the subscriptions' 10 and 11", ended)
	}
	c.Subscribe(12, "c", 1) // room for it again, on the same connection
}
