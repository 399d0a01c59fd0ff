package transport

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/session"
)

// rawAnswer sends req and reads its answer frame by frame, continuation frames included, without
// decoding the parts: it returns the whole body's bytes (what the server built) and the decoded
// answer.
func rawAnswer(t *testing.T, c *rawClient, reqID uint32, req fibp.Frame) (int, fibp.Frame) {
	t.Helper()
	c.Send(reqID, req)
	var body []byte
	for {
		b, err := c.FR.Next()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		h, rest, err := fibp.ParseHeader(b)
		if err != nil || h.RequestID != reqID {
			t.Fatalf("frame %v for request %d: %v", h.Opcode, h.RequestID, err)
		}
		body = append(body, rest...)
		if h.Flags&fibp.FlagContinuation == 0 {
			f, err := fibp.Decode(h.Opcode, body)
			if err != nil {
				t.Fatalf("decode %v of %d bytes: %v", h.Opcode, len(body), err)
			}
			return len(body), f
		}
	}
}

// allocated is the bytes the process has allocated so far.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// GetStats over many large fairness keys answers within a bounded size: the keys with the
// largest backlogs, as many as fit session.MaxListBytes, sorted by key; building and reading the
// answer allocates a bounded amount. Before, the answer listed every key (400 keys of 60 KB: a
// 24 MB answer; 3,000 of them OOM-killed a 2 GiB server).
func TestGetStatsOverLargeFairnessKeysIsBounded(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	if r, ok := c.Call(1, &fibp.CreateQueue{Name: "wide"}).(*fibp.CreateQueueResult); !ok || r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue: %#v", r)
	}
	const keys, keyBytes, heavy = 400, 60_000, 10
	key := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("k", keyBytes-4) }
	var msgs []fibp.EnqueueMessage
	flush := func() {
		res, ok := c.Call(2, &fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult)
		if !ok || len(res.Results) != len(msgs) {
			t.Fatalf("Enqueue: %#v", res)
		}
		for _, r := range res.Results {
			if r.ErrorCode != fibp.CodeOk {
				t.Fatalf("Enqueue item: %v", r.ErrorCode)
			}
		}
		msgs = msgs[:0]
	}
	for i := range keys {
		n := 1
		if i%(keys/heavy) == keys/heavy-1 { // spread through the key order
			n = 3
		}
		for range n {
			msgs = append(msgs, fibp.EnqueueMessage{Queue: "wide", FairnessKey: wire.Some(key(i)), Payload: []byte("x")})
		}
		if len(msgs) >= 50 {
			flush()
		}
	}
	flush()

	runtime.GC()
	before := allocated()
	size, f := rawAnswer(t, c, 3, &fibp.GetStats{Queue: "wide"})
	alloc := allocated() - before
	res, ok := f.(*fibp.GetStatsResult)
	if !ok || res.ErrorCode != fibp.CodeOk {
		t.Fatalf("GetStats answered %#v", f)
	}
	listed := len(res.PerKeyStats)
	t.Logf("GetStats over %d keys of %d bytes: %d bytes, %d keys listed, %d bytes allocated", keys, keyBytes, size, listed, alloc)
	if size > session.MaxListBytes+64<<10 {
		t.Fatalf("the answer is %d bytes; its per-key list is bounded by %d", size, session.MaxListBytes)
	}
	if want := session.MaxListBytes / (keyBytes + 22); listed != want || res.ActiveFairnessKeys != keys {
		t.Fatalf("%d keys listed (want the %d that fit), active_fairness_keys %d", listed, want, res.ActiveFairnessKeys)
	}
	if !slices.IsSortedFunc(res.PerKeyStats, func(a, b fibp.FairnessKeyStat) int { return strings.Compare(a.Key, b.Key) }) {
		t.Fatal("the listed keys are not sorted by key")
	}
	heavyListed := 0
	for _, k := range res.PerKeyStats {
		if k.PendingCount == 3 {
			heavyListed++
		}
	}
	if heavyListed != heavy {
		t.Fatalf("%d of the %d keys with the largest backlog listed", heavyListed, heavy)
	}
	if alloc > 6*session.MaxListBytes {
		t.Fatalf("one GetStats allocated %d bytes (server and client); its answer is bounded by %d", alloc, session.MaxListBytes)
	}
}

// ListConfig answers within session.MaxListBytes however many large entries are set: the first
// keys by name, as many as fit.
func TestListConfigIsBounded(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	const entries, valueBytes = 100, 60_000
	for i := range entries {
		if r, ok := c.Call(1, &fibp.SetConfig{Key: fmt.Sprintf("app.%03d", i), Value: strings.Repeat("v", valueBytes)}).(*fibp.SetConfigResult); !ok || r.ErrorCode != fibp.CodeOk {
			t.Fatalf("SetConfig: %#v", r)
		}
	}
	size, f := rawAnswer(t, c, 2, &fibp.ListConfig{Prefix: "app."})
	res, ok := f.(*fibp.ListConfigResult)
	if !ok || res.ErrorCode != fibp.CodeOk {
		t.Fatalf("ListConfig answered %#v", f)
	}
	t.Logf("ListConfig over %d entries of %d bytes: %d bytes, %d listed", entries, valueBytes, size, len(res.Entries))
	if size > session.MaxListBytes+1024 || len(res.Entries) == 0 || len(res.Entries) >= entries {
		t.Fatalf("ListConfig answered %d bytes, %d of %d entries; bounded by %d", size, len(res.Entries), entries, session.MaxListBytes)
	}
	for i, e := range res.Entries {
		if e.Key != fmt.Sprintf("app.%03d", i) {
			t.Fatalf("entry %d is %q: not the first keys by name", i, e.Key)
		}
	}
}
