package transport

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// A client that pipelines many CreateQueues on one connection, then requests that depend on
// them, gets every CreateQueue answered once (in whatever order they complete), and each later
// request sees every queue created before it: the Enqueue and UpdateQueue pipelined behind them
// find their queues, and a second CreateQueue of a name is QueueAlreadyExists.
func TestPipelinedCreateQueuesAreAllSeenByWhatFollows(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	const n = 40
	for i := range n {
		c.Send(uint32(i+1), &fibp.CreateQueue{Name: fmt.Sprintf("q%d", i)})
	}
	msgs := make([]fibp.EnqueueMessage, n)
	for i := range msgs {
		msgs[i] = fibp.EnqueueMessage{Queue: fmt.Sprintf("q%d", i), Payload: []byte("x")}
	}
	c.Send(100, &fibp.Enqueue{Messages: msgs})
	c.Send(101, &fibp.UpdateQueue{Queue: fmt.Sprintf("q%d", n-1), VisibilityTimeoutMs: wire.Some[uint64](5000)})
	c.Send(102, &fibp.CreateQueue{Name: "q0"})
	created := map[uint32]bool{}
	for range n + 3 {
		h, f := c.Next()
		switch r := f.(type) {
		case *fibp.CreateQueueResult:
			want := fibp.CodeOk
			if h.RequestID == 102 {
				want = fibp.CodeQueueAlreadyExists
			} else if created[h.RequestID] || h.RequestID > n {
				t.Fatalf("CreateQueue result for request %d: answered twice or never asked", h.RequestID)
			}
			if r.ErrorCode != want {
				t.Fatalf("CreateQueue %d answered %v, want %v", h.RequestID, r.ErrorCode, want)
			}
			created[h.RequestID] = true
		case *fibp.EnqueueResult:
			if len(created) < n {
				t.Fatalf("the Enqueue was answered before every CreateQueue before it (%d of %d)", len(created), n)
			}
			for i, res := range r.Results {
				if res.ErrorCode != fibp.CodeOk {
					t.Fatalf("message %d for q%d: %v", i, i, res.ErrorCode)
				}
			}
		case *fibp.UpdateQueueResult:
			if r.ErrorCode != fibp.CodeOk {
				t.Fatalf("UpdateQueue answered %v", r.ErrorCode)
			}
		default:
			t.Fatalf("unexpected answer to request %d: %#v", h.RequestID, f)
		}
	}
	if len(created) != n+1 {
		t.Fatalf("%d CreateQueue results, want %d", len(created), n+1)
	}
}
