package transport

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// heapAfterGC is the live heap once the garbage collector has run.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// bystander is a well-behaved client that enqueues one small message at a time into its own
// queue while an attacker works beside it; finish reports its latency and checks that every
// request succeeded.
type bystander struct {
	t     testing.TB
	stop  chan struct{}
	done  chan struct{}
	lat   []time.Duration
	fails []string
}

func startBystander(t testing.TB, addr string) *bystander {
	t.Helper()
	c := dialRaw(t, addr)
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "bystander"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue bystander: %+v", r)
	}
	b := &bystander{t: t, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		msg := &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "bystander", Payload: []byte("x")}}}
		for id := uint32(2); ; id++ {
			select {
			case <-b.stop:
				return
			case <-time.After(time.Millisecond):
			}
			start := time.Now()
			switch r := c.Call(id, msg).(type) {
			case *fibp.EnqueueResult:
				if r.Results[0].ErrorCode != fibp.CodeOk {
					b.fails = append(b.fails, r.Results[0].ErrorCode.String())
				}
			default:
				b.fails = append(b.fails, r.Opcode().String())
			}
			b.lat = append(b.lat, time.Since(start))
		}
	}()
	return b
}

// finish stops the bystander, logs its latency and fails the test if any request failed.
func (b *bystander) finish() {
	b.t.Helper()
	close(b.stop)
	<-b.done
	if len(b.lat) == 0 {
		b.t.Fatal("the bystander made no request")
	}
	slices.Sort(b.lat)
	q := func(p float64) time.Duration { return b.lat[int(p*float64(len(b.lat)-1))] }
	b.t.Logf("bystander: %d enqueues, latency p50 %v p99 %v max %v", len(b.lat), q(0.5), q(0.99), b.lat[len(b.lat)-1])
	if len(b.fails) > 0 {
		b.t.Fatalf("the bystander's requests failed: %v", b.fails)
	}
}

// repeatedHeaderMessage is an Enqueue message declaring n headers that all repeat one empty key.
func repeatedHeaderMessage(b []byte, queue string, n int) []byte {
	b = wire.AppendString16(b, queue)
	b = wire.AppendCount(b, 2, n)
	for range n {
		b = wire.AppendString16(b, "")
		b = wire.AppendString16(b, "")
	}
	b = wire.AppendBytes32(b, nil)
	return append(b, 0, 0, 0, 0) // no fairness key, weight, delay or idempotency key
}

// Issue 16, item 2: messages that each declare 65,535 headers of one repeated key used to keep a
// 65,535-entry map each for as long as they stayed queued (~20× the bytes sent).
func TestRepeatedHeaderKeysDoNotAmplifyQueuedMemory(t *testing.T) {
	_, addr := startServer(t, Options{})
	by := startBystander(t, addr)
	c := dialRaw(t, addr)
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "q"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue: %+v", r)
	}
	const perMsg, msgs = 65535, 40
	body := wire.AppendCount(nil, 4, msgs)
	for range msgs {
		body = repeatedHeaderMessage(body, "q", perMsg)
	}
	frame := fibp.AppendContinued(nil, fibp.OpEnqueue, 2, body, fibp.MaxFrameSize)
	base := heapAfterGC()
	c.SendBytes(frame)
	_, f := c.Next()
	r, ok := f.(*fibp.EnqueueResult)
	if !ok || len(r.Results) != msgs || r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("Enqueue answered %#v", f)
	}
	by.finish()
	c.Call(90, &fibp.Ping{}) // the connection has finished with the request and its answer
	c.FR.Shrink(0)           // the test client's own buffer for the answer
	grew := heapAfterGC() - base
	runtime.KeepAlive(frame) // live at both measurements
	t.Logf("%d bytes sent; live heap grew by %d bytes with the %d messages queued", len(body), grew, msgs)
	if bound := int64(len(body)) / 2; grew > bound {
		t.Fatalf("live heap grew by %d bytes for %d queued messages (%d bytes sent); bound %d", grew, msgs, len(body), bound)
	}
}

// Issue 16, item 3: the connection's reused decoding target kept the size of its largest Enqueue
// (about 10× its bytes in minimal messages) for the connection's lifetime.
func TestLargeEnqueueLeavesNoDecodingTargetBehind(t *testing.T) {
	_, addr := startServer(t, Options{})
	by := startBystander(t, addr)
	c := dialRaw(t, addr)
	c.Handshake()
	const msgs = 300_000 // 13 bytes each: a 3.9 MB frame
	body := wire.AppendCount(nil, 4, msgs)
	for range msgs {
		body = wire.AppendString16(body, "x") // no such queue: nothing stays queued
		body = wire.AppendCount(body, 2, 0)
		body = wire.AppendBytes32(body, nil)
		body = append(body, 0, 0, 0, 0)
	}
	frame := fibp.AppendContinued(nil, fibp.OpEnqueue, 2, body, fibp.MaxFrameSize)
	base := heapAfterGC()
	c.SendBytes(frame)
	_, f := c.Next()
	if r, ok := f.(*fibp.EnqueueResult); !ok || len(r.Results) != msgs || r.Results[0].ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("Enqueue answered %v", f.Opcode())
	}
	by.finish()
	c.Call(90, &fibp.Ping{}) // the connection has finished with the request and its answer
	c.FR.Shrink(0)           // the test client's own buffer for the answer
	grew := heapAfterGC() - base
	runtime.KeepAlive(frame) // live at both measurements
	t.Logf("%d bytes sent; live heap after the answer grew by %d bytes", len(body), grew)
	if bound := int64(len(body)) / 2; grew > bound {
		t.Fatalf("the connection keeps %d bytes after a %d-byte Enqueue; bound %d", grew, len(body), bound)
	}
	// The connection still serves requests of the same kind.
	if r, ok := c.Call(3, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "x"}}}).(*fibp.EnqueueResult); !ok || r.Results[0].ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("a later Enqueue answered %#v", r)
	}
}
