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

// Admin requests other than CreateQueue keep their place among the others: a queue created,
// deleted and created again in three pipelined requests is answered Ok three times, in order,
// and the Enqueue behind them finds the queue.
func TestPipelinedAdminRequestsKeepTheirOrder(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	c.Send(1, &fibp.CreateQueue{Name: "q"})
	c.Send(2, &fibp.DeleteQueue{Queue: "q"})
	c.Send(3, &fibp.CreateQueue{Name: "q"})
	c.Send(4, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "q", Payload: []byte("x")}}})
	c.Send(5, &fibp.Ping{})
	pong := false
	for want := uint32(1); want <= 4 || !pong; {
		h, f := c.Next()
		if h.RequestID == 5 { // a Ping waits for nothing: it may come first
			pong = true
			continue
		}
		if h.RequestID != want {
			t.Fatalf("answer to request %d (%T) before %d's", h.RequestID, f, want)
		}
		var code fibp.ErrorCode
		switch r := f.(type) {
		case *fibp.CreateQueueResult:
			code = r.ErrorCode
		case *fibp.DeleteQueueResult:
			code = r.ErrorCode
		case *fibp.EnqueueResult:
			code = r.Results[0].ErrorCode
		default:
			t.Fatalf("request %d answered %#v", h.RequestID, f)
		}
		if code != fibp.CodeOk {
			t.Fatalf("request %d answered %v", h.RequestID, code)
		}
		want++
	}
}
