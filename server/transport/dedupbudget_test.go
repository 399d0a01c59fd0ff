package transport

import (
	"strconv"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// The deduplication memory through FIBP (docs/delivery.md, "Deduplication"): bounded per queue,
// with windows of at most 7 days. Before, every identity was remembered for its whole window,
// without a bound, and a window of 2^63 ms was accepted.

func TestDedupMemoryIsBoundedPerQueue(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	setConfig(t, c, "dedup.max_identities_per_queue", "100")
	newQueue(t, c, &fibp.CreateQueue{Name: "once"})
	newQueue(t, c, &fibp.CreateQueue{Name: "other"})
	msgs := make([]fibp.EnqueueMessage, 150)
	for i := range msgs {
		k := strconv.Itoa(i)
		msgs[i] = fibp.EnqueueMessage{Queue: "once", Payload: []byte(k), IdempotencyKey: wire.Some(k)}
	}
	r := c.Call(1, &fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult)
	for i, res := range r.Results {
		want := fibp.CodeOk
		if i >= 100 {
			want = fibp.CodeChannelFull // retry once identities have expired
		}
		if res.ErrorCode != want {
			t.Fatalf("message %d with a new identity answered %v, want %v", i, res.ErrorCode, want)
		}
	}
	// At the bound a duplicate is still answered, and a message without an identity or on
	// another queue is stored.
	r = c.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{msgs[0], {Queue: "once", Payload: []byte("plain")},
		{Queue: "other", Payload: []byte("x"), IdempotencyKey: wire.Some("0")}}}).(*fibp.EnqueueResult)
	if !r.Results[0].Duplicate || r.Results[1].ErrorCode != fibp.CodeOk || r.Results[2].ErrorCode != fibp.CodeOk || r.Results[2].Duplicate {
		t.Fatalf("at the bound: %+v", r.Results)
	}
	if s := stats(t, c, "once"); s.Depth != 101 {
		t.Fatalf("depth %d, want 100 messages with an identity and 1 without", s.Depth)
	}
}

func TestDedupWindowAboveTheMaximumIsRefused(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	const week = 7 * 24 * 60 * 60 * 1000
	for _, w := range []uint64{week + 1, 1 << 63} {
		if e := expectError(t, c.Call(1, &fibp.CreateQueue{Name: "q", DedupWindowMs: w}), fibp.CodeInvalidConfigValue); !strings.Contains(e.Message, "exceeds 7 days") {
			t.Fatalf("CreateQueue with a window of %d ms: %q", w, e.Message)
		}
	}
	newQueue(t, c, &fibp.CreateQueue{Name: "q", DedupWindowMs: week})
	expectError(t, c.Call(2, &fibp.UpdateQueue{Queue: "q", DedupWindowMs: wire.Some[uint64](week + 1)}), fibp.CodeInvalidConfigValue)
	if r, ok := c.Call(3, &fibp.SetConfig{Key: "defaults.dedup_window_ms", Value: strconv.Itoa(week + 1)}).(*fibp.Error); !ok || r.ErrorCode != fibp.CodeInvalidConfigValue {
		t.Fatalf("defaults.dedup_window_ms above 7 days: %+v", r)
	}
}
