package nodelink

import (
	"errors"
	"testing"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// forwardHandler answers forwarded requests as its functions say; a nil function never answers
// (a node paused mid-request).
type forwardHandler struct {
	metaHandler
	enqueue func(*cluster.ForwardEnqueue, func(*cluster.ForwardEnqueueResult))
	settle  func(*cluster.ForwardSettle, func(*cluster.ForwardSettleResult))
}

func (h *forwardHandler) ForwardedEnqueue(req *cluster.ForwardEnqueue, answer func(*cluster.ForwardEnqueueResult)) {
	if h.enqueue != nil {
		h.enqueue(req, answer)
	}
}

func (h *forwardHandler) ForwardedSettle(req *cluster.ForwardSettle, answer func(*cluster.ForwardSettleResult)) {
	if h.settle != nil {
		h.settle(req, answer)
	}
}

// forwardEnqueue forwards req from one node to another and waits for the outcome (a minute at
// most: the forward timeout must end it before).
func forwardEnqueue(t *testing.T, from *Link, to meta.NodeID, req *cluster.ForwardEnqueue) (*cluster.ForwardEnqueueResult, error) {
	t.Helper()
	type outcome struct {
		x   *cluster.ForwardEnqueueResult
		err error
	}
	ch := make(chan outcome, 1)
	from.ForwardEnqueue(to, req, func(x *cluster.ForwardEnqueueResult, err error) { ch <- outcome{x, err} })
	select {
	case o := <-ch:
		return o.x, o.err
	case <-time.After(time.Minute):
		t.Fatal("a forwarded request was never answered")
		return nil, nil
	}
}

// A forwarded request reaches the other node's handler with what was sent and comes back with
// its answer; a node without a handler of forwarded requests, one that never answers (within
// the forward timeout), one that answers a result per message it was not sent, and one that is
// unreachable each end the request with an error, never leave it waiting.
func TestForwardedRequestsAreAnsweredOrFail(t *testing.T) {
	tr := newTrio(t, func(_ meta.NodeID, c *Config) { c.ForwardTimeout = 200 * time.Millisecond })
	req := &cluster.ForwardEnqueue{Messages: []cluster.ForwardMessage{
		{Queue: "q", Headers: map[string]string{"h": "v"}, Payload: []byte("one"), HasIdempotencyKey: true, IdempotencyKey: "k"},
		{Queue: "r", Payload: []byte("two"), DelayMs: 5}}}

	if _, err := forwardEnqueue(t, tr.links["n1"], "n2", req); err == nil {
		t.Fatal("a node without a handler took a forwarded enqueue")
	}

	var got []cluster.ForwardMessage
	tr.links["n2"].SetHandler(&forwardHandler{enqueue: func(r *cluster.ForwardEnqueue, answer func(*cluster.ForwardEnqueueResult)) {
		for _, m := range r.Messages {
			m.Payload = append([]byte(nil), m.Payload...) // valid only during the call
			got = append(got, m)
		}
		x := &cluster.ForwardEnqueueResult{Results: make([]cluster.ForwardEnqueueItem, len(r.Messages))}
		x.Results[1] = cluster.ForwardEnqueueItem{Code: 21, LeaderNodeID: 3, LeaderAddr: "127.0.0.1:5563"}
		go answer(x)
	}})
	x, err := forwardEnqueue(t, tr.links["n1"], "n2", req)
	if err != nil || len(x.Results) != 2 || x.Results[1].LeaderAddr != "127.0.0.1:5563" {
		t.Fatalf("forwarded enqueue: %+v, %v", x, err)
	}
	if len(got) != 2 || string(got[0].Payload) != "one" || got[0].Headers["h"] != "v" || got[0].IdempotencyKey != "k" ||
		got[1].Queue != "r" || got[1].DelayMs != 5 {
		t.Fatalf("the handler was handed %+v", got)
	}

	tr.links["n3"].SetHandler(&forwardHandler{}) // takes the request and never answers
	if _, err := forwardEnqueue(t, tr.links["n1"], "n3", req); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a request never answered ended with %v, want ErrUnreachable after the forward timeout", err)
	}

	tr.links["n3"].SetHandler(&forwardHandler{enqueue: func(_ *cluster.ForwardEnqueue, answer func(*cluster.ForwardEnqueueResult)) {
		answer(&cluster.ForwardEnqueueResult{Results: make([]cluster.ForwardEnqueueItem, 1)})
	}})
	var perr *ProtocolError
	if _, err := forwardEnqueue(t, tr.links["n1"], "n3", req); !errors.As(err, &perr) {
		t.Fatalf("one result to two messages ended with %v, want a ProtocolError", err)
	}

	tr.links["n1"].Partition("n2")
	if _, err := forwardEnqueue(t, tr.links["n1"], "n2", req); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a request to a node cut off ended with %v, want ErrUnreachable", err)
	}
}
