package transport

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// A consumer of a standing backlog whose bodies have left the broker's body cache gets every
// body byte-exact, each fairness key's messages in enqueue order, across restarts, with acks
// interleaved with enqueues. The cache holds about two bodies, so nearly every delivery reads its
// body back from storage, many per round with other keys' messages between them.
func TestStandingBacklogDeliversEveryBodyInOrderAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	tinyCache := func(o *broker.Options) { o.BodyCacheBytes = 2 << 10 }
	addr, stop := startAtWith(t, dir, tinyCache)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q", VisibilityTimeoutMs: 600_000, Backoff: fibp.BackoffNone})

	type sent struct {
		key     string
		payload []byte
	}
	all := map[wire.UUID]sent{}
	order := map[string][]wire.UUID{} // each key's IDs in enqueue order
	n := 0
	enqueueSome := func(count int) {
		var msgs []fibp.EnqueueMessage
		for range count {
			key := []string{"a", "a", "b", "c", "a", "b"}[n%6]
			p := bytes.Repeat([]byte{byte(n), byte(n >> 8), 0, 0xff}, n%700) // 0 to 2,796 bytes
			msgs = append(msgs, fibp.EnqueueMessage{Queue: "q", FairnessKey: wire.Some(key), Payload: p,
				Headers: map[string]string{"n": fmt.Sprint(n)}})
			n++
		}
		for i, id := range enqueue(t, c, msgs...) {
			k := msgs[i].FairnessKey.Value
			all[id] = sent{key: k, payload: msgs[i].Payload}
			order[k] = append(order[k], id)
		}
	}
	next := map[string]int{} // each key's next expected position in order
	var req uint32 = 1000
	consume := func(count, more int) {
		req++
		c.Subscribe(req, "q", uint32(count))
		ds := c.Deliveries(count)
		if len(ds) != count {
			t.Fatalf("credit %d delivered %d", count, len(ds))
		}
		for i, d := range ds {
			want, ok := all[d.MessageID]
			if !ok {
				t.Fatalf("delivered %v, which was never enqueued or was delivered before", d.MessageID)
			}
			if d.FairnessKey != want.key || order[want.key][next[want.key]] != d.MessageID {
				t.Fatalf("delivered %v of key %s out of its key's enqueue order", d.MessageID, d.FairnessKey)
			}
			if !bytes.Equal(d.Payload, want.payload) || d.Headers["n"] == "" {
				t.Fatalf("%v: body of %d bytes (headers %v), want %d bytes", d.MessageID, len(d.Payload), d.Headers, len(want.payload))
			}
			next[want.key]++
			delete(all, d.MessageID)
			if i == count/2 {
				enqueueSome(more) // enqueues between the acks
			}
			req++
			r := c.Call(req, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q", MessageID: d.MessageID}}}).(*fibp.AckResult)
			if r.Results[0].ErrorCode != fibp.CodeOk {
				t.Fatalf("ack %v: %v", d.MessageID, r.Results[0].ErrorCode)
			}
		}
	}
	restart := func() {
		stop()
		addr, stop = startAtWith(t, dir, tinyCache)
		c = dialRaw(t, addr)
		c.Handshake()
	}
	for range 4 {
		enqueueSome(150)
		consume(90, 7)
		restart()
	}
	defer func() { stop() }()
	if left := len(all); left > 0 {
		consume(left, 0)
	}
	if s := stats(t, c, "q"); s.Depth != 0 || s.InFlight != 0 {
		t.Fatalf("after consuming everything: depth %d, in flight %d", s.Depth, s.InFlight)
	}
}
