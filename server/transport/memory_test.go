package transport

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/membudget"
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
	once  sync.Once
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
	t.Cleanup(func() { // a test that failed early: stop before the connection closes
		b.once.Do(func() { close(b.stop) })
		<-b.done
	})
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
	b.once.Do(func() { close(b.stop) })
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

// openConns is the number of connections the server holds.
func openConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// pollUntil calls cond every few milliseconds until it holds, failing the test with what after
// many tries. It waits for a condition; it asserts nothing about time.
func pollUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// Issue 16, item 1: partial bodies are bounded by the connection's memory, not 64 × 64 MiB, and
// an idle one is dropped even while the client keeps answering Pings.
func TestContinuationPartialsAreBoundedAndExpire(t *testing.T) {
	const bound = 8 << 20
	_, addr := startServer(t, Options{MaxConnectionMemory: bound, ReassemblyTimeout: time.Second})
	by := startBystander(t, addr)
	c := dialRaw(t, addr)
	c.Handshake()
	chunk := make([]byte, 1<<20)
	base := heapAfterGC()
	const partials = 64
	for id := uint32(1); id <= partials; id++ {
		b := wire.AppendU32(nil, uint32(fibp.HeaderSize+len(chunk)))
		b = fibp.Header{Opcode: fibp.OpEnqueue, Flags: fibp.FlagContinuation, RequestID: id}.AppendTo(b)
		c.SendBytes(append(b, chunk...))
	}
	c.Send(100, &fibp.Ping{}) // answered once every chunk has been taken or refused
	refused := map[uint32]bool{}
	expired := 0 // on a slow machine, the first partials may expire before the last is sent
	for {
		h, f := c.Next()
		if f.Opcode() == fibp.OpPong {
			break
		}
		switch e, _ := f.(*fibp.Error); {
		case e != nil && e.ErrorCode == fibp.CodeChannelFull && e.Metadata[fibp.MetaRetryAfterMs] != "":
			refused[h.RequestID] = true
		case e != nil && e.ErrorCode == fibp.CodeInvalidFrame && strings.Contains(e.Message, "discarded"):
			expired++
		default:
			t.Fatalf("a refused chunk was answered %#v", f)
		}
	}
	held := heapAfterGC() - base
	t.Logf("%d of %d partial bodies refused; live heap grew by %d bytes (bound %d)", len(refused), partials, held, bound)
	if held > bound {
		t.Fatalf("%d partial bodies of 1 MiB hold %d bytes of live heap; bound %d", partials-len(refused), held, bound)
	}
	if len(refused) == 0 {
		t.Fatal("no partial body was refused")
	}
	// The partials that were taken expire while the client goes on pinging.
	pollUntil(t, "the idle partial bodies expire", func() bool {
		c.Send(101, &fibp.Ping{})
		for {
			h, f := c.Next()
			if f.Opcode() == fibp.OpPong {
				return expired == partials-len(refused)
			}
			if e, ok := f.(*fibp.Error); !ok || e.ErrorCode != fibp.CodeInvalidFrame || refused[h.RequestID] {
				t.Fatalf("expiry answered %#v on %d", f, h.RequestID)
			}
			expired++
		}
	})
	by.finish()
	if after := heapAfterGC() - base; after > bound/4 {
		t.Fatalf("live heap still %d bytes above the start after the partial bodies expired", after)
	}
}

// Issue 16, item 4: a client that floods Pings and never reads is cut once its queued answers
// hold its memory bound, counted in memory (per-frame overhead included), not in frame bytes —
// the connection's own bound, or the server-wide budget, where the connection holding the most
// is cut and the bystander is not.
func TestUnreadAnswersAreCountedInMemory(t *testing.T) {
	const bound = 16 << 20
	t.Run("connection bound", func(t *testing.T) {
		floodUnread(t, bound, Options{MaxConnectionMemory: bound})
	})
	t.Run("server budget", func(t *testing.T) {
		floodUnread(t, bound, Options{Budget: membudget.New(bound)})
	})
}

func floodUnread(t *testing.T, bound int64, opts Options) {
	s, addr := startServer(t, opts)
	by := startBystander(t, addr)
	c := dialRaw(t, addr)
	c.Handshake()
	const pings = 1_500_000 // 15 MB of Pings; their Pongs, queued, would cost about 100 MB
	flood := make([]byte, 0, pings*(4+fibp.HeaderSize))
	for i := range uint32(pings) {
		flood = fibp.AppendFrame(flood, 0, i+1, &fibp.Ping{})
	}
	base := heapAfterGC()
	go func() { _, _ = c.NC.Write(flood) }() // fails once the server cuts the connection
	peak := int64(0)
	pollUntil(t, "the server cuts the connection that does not read", func() bool {
		peak = max(peak, heapAfterGC()-base)
		return openConns(s) == 1 // the bystander's
	})
	runtime.KeepAlive(flood) // live at every measurement
	by.finish()
	t.Logf("live heap peaked %d bytes above the start while the attacker's Pongs queued (bound %d)", peak, bound)
	if peak > 2*bound {
		t.Fatalf("unread Pongs held %d bytes of live heap; bound %d", peak, bound)
	}
}

// minimalEnqueue is an Enqueue body of n messages of 13 bytes each to queue.
func minimalEnqueue(queue string, n int) []byte {
	body := wire.AppendCount(nil, 4, n)
	for range n {
		body = wire.AppendString16(body, queue)
		body = wire.AppendCount(body, 2, 0)
		body = wire.AppendBytes32(body, nil)
		body = append(body, 0, 0, 0, 0)
	}
	return body
}

// Issue 16, item 3: an Enqueue whose decoded form would pass the connection's memory bound is
// refused before it is decoded (InvalidFrame: it can never fit); the connection goes on.
func TestEnqueueMemoryIsReservedBeforeDecoding(t *testing.T) {
	const bound = 32 << 20
	_, addr := startServer(t, Options{MaxConnectionMemory: bound})
	by := startBystander(t, addr)
	c := dialRaw(t, addr)
	c.Handshake()
	body := minimalEnqueue("x", 300_000) // 3.9 MB; about 150 MB once decoded and handed on
	c.SendBytes(fibp.AppendContinued(nil, fibp.OpEnqueue, 2, body, fibp.MaxFrameSize))
	_, f := c.Next()
	if e, ok := f.(*fibp.Error); !ok || e.ErrorCode != fibp.CodeInvalidFrame || !strings.Contains(e.Message, "connection bound") {
		t.Fatalf("an Enqueue beyond the connection's bound answered %#v", f)
	}
	// A request that fits alone still goes through.
	if r, ok := c.Call(3, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "x"}}}).(*fibp.EnqueueResult); !ok || r.Results[0].ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("a small Enqueue answered %#v", r)
	}
	by.finish()
}

// A frame whose buffer the connection's memory bound cannot take is refused before it is read
// into memory (InvalidFrame: it can never fit) and skipped; the connection goes on.
func TestFrameBeyondTheConnectionBoundIsSkipped(t *testing.T) {
	const bound = 1 << 20
	_, addr := startServer(t, Options{MaxConnectionMemory: bound})
	c := dialRaw(t, addr)
	c.Handshake()
	big := &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "x", Payload: make([]byte, 2<<20)}}}
	c.Send(2, big)
	_, f := c.Next()
	if e, ok := f.(*fibp.Error); !ok || e.ErrorCode != fibp.CodeInvalidFrame || !strings.Contains(e.Message, "memory") {
		t.Fatalf("a 2 MiB frame over a 1 MiB bound answered %#v", f)
	}
	if r, ok := c.Call(3, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "x"}}}).(*fibp.EnqueueResult); !ok || r.Results[0].ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("the next Enqueue answered %#v", r)
	}
}

// Header maps are decoded within the memory the connection may still hold: an Enqueue of 800
// messages with 1,000 distinct headers each (4.8 MB sent, about 40 MB as maps) stops decoding at
// the bound and is answered ChannelFull, instead of building its maps first.
func TestHeaderMapsAreDecodedWithinTheConnectionBound(t *testing.T) {
	const bound = 24 << 20
	_, addr := startServer(t, Options{MaxConnectionMemory: bound})
	by := startBystander(t, addr)
	c := dialRaw(t, addr)
	c.Handshake()
	const msgs, headers = 800, 1000
	body := wire.AppendCount(nil, 4, msgs)
	for range msgs {
		body = wire.AppendString16(body, "x")
		body = wire.AppendCount(body, 2, headers)
		for k := range headers {
			body = wire.AppendString16(body, strconv.Itoa(k))
			body = wire.AppendString16(body, "")
		}
		body = wire.AppendBytes32(body, nil)
		body = append(body, 0, 0, 0, 0)
	}
	frame := fibp.AppendContinued(nil, fibp.OpEnqueue, 2, body, fibp.MaxFrameSize)
	body = nil
	base := heapAfterGC()
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		p := int64(0)
		for {
			select {
			case <-done:
				peak <- p
				return
			default:
				p = max(p, heapAfterGC()-base)
			}
		}
	}()
	c.SendBytes(frame)
	_, f := c.Next()
	close(done)
	grew := <-peak
	runtime.KeepAlive(frame)
	by.finish()
	t.Logf("live heap peaked %d bytes above the start while %d bytes of headers were decoded (bound %d)", grew, len(frame), bound)
	if e, ok := f.(*fibp.Error); !ok || e.ErrorCode != fibp.CodeChannelFull || !strings.Contains(e.Message, "headers") {
		t.Fatalf("the Enqueue answered %#v", f)
	}
	if grew > bound {
		t.Fatalf("decoding held %d bytes of live heap; bound %d", grew, bound)
	}
}
