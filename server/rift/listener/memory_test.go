package listener_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
	rt "github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/rift/listener"
)

func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Issue 16, item 9: the subscriber queues of one connection are bounded together, not each
// alone. A connection that holds 50 subscriptions and reads none of them stays within its memory
// bound (its subscriptions end as slow consumers), while a well-behaved subscriber on another
// connection keeps receiving.
func TestSubscriberQueuesOfAConnectionAreBoundedTogether(t *testing.T) {
	const bound = 8 << 20
	f := start(t, func(o *listener.Options) {
		o.SubQueueMsgs = 256
		o.Budget = membudget.New(1 << 30)
		o.MaxConnectionMemory = bound
	})
	small := &quic.Config{InitialStreamReceiveWindow: 16 << 10, MaxStreamReceiveWindow: 16 << 10,
		InitialConnectionReceiveWindow: 64 << 10, MaxConnectionReceiveWindow: 64 << 10}
	attacker, err := rt.Dial(t, f.addr, rt.ClientTLS(t), small)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Auth(attacker, "admin-token"); err != nil {
		t.Fatal(err)
	}
	const subs = 50
	for i := range subs {
		rt.Subscribe(t, attacker, fmt.Sprintf("feed.%d", i), "") // never read
	}
	c := rt.Connect(t, f.addr, "admin-token")
	good := rt.Subscribe(t, c, "good", "")
	pub := rt.Open(t, c)
	payload := make([]byte, 4<<10)
	base := heapAfterGC()
	var lat []time.Duration
	for round := range 256 { // 50 × 256 × 4 KiB = 50 MiB offered to the attacker's queues
		for i := range subs {
			pub.Send(t, &riftproto.Publish{Subject: fmt.Sprintf("feed.%d", i), Payload: payload})
		}
		start := time.Now()
		pub.Send(t, &riftproto.Publish{Subject: "good", Payload: []byte{byte(round)}})
		if m := rt.Expect[*riftproto.Message](t, good); len(m.Payload) != 1 || m.Payload[0] != byte(round) {
			t.Fatalf("the good subscriber got %v", m.Payload)
		}
		lat = append(lat, time.Since(start))
	}
	pub.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, pub)
	held := heapAfterGC() - base
	slices.Sort(lat)
	t.Logf("good subscriber: %d deliveries, latency p50 %v p99 %v max %v", len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	t.Logf("live heap grew by %d bytes with %d unread subscriptions (bound %d); %d subscriptions left on the bus",
		held, subs, bound, f.svc.Bus.Subscriptions())
	if held > 2*bound {
		t.Fatalf("unread subscriptions of one connection hold %d bytes of live heap; bound %d", held, bound)
	}
}

// halfFrames opens up to n streams on c and writes on each the first bytes of the largest
// PUBLISH frame, never the rest: each would make the server hold a large-body buffer. It stops at
// the first stream the connection no longer allows (it was closed) and returns those written.
func halfFrames(c *quic.Conn, n int) []*quic.Stream {
	head := binary.BigEndian.AppendUint32(nil, riftproto.MaxFrameSize)
	head = append(head, byte(riftproto.OpPublish))
	head = append(head, make([]byte, 100)...)
	var strs []*quic.Stream
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := c.OpenStreamSync(ctx)
		cancel()
		if err != nil {
			break
		}
		if _, err := s.Write(head); err != nil {
			break
		}
		strs = append(strs, s)
	}
	return strs
}

// goodRoundTrips has a well-behaved client publish small and large payloads to its own
// subscriber and returns the latencies.
func goodRoundTrips(t *testing.T, pub, sub *rt.Stream, rounds int) []time.Duration {
	t.Helper()
	large := make([]byte, 512<<10)
	var lat []time.Duration
	for round := range rounds {
		payload := []byte{byte(round)}
		if round%4 == 0 {
			payload = large
		}
		start := time.Now()
		pub.Send(t, &riftproto.PublishAck{Subject: "good", Payload: payload})
		rt.Expect[*riftproto.Ok](t, pub)
		if m := rt.Expect[*riftproto.Message](t, sub); len(m.Payload) != len(payload) {
			t.Fatalf("round %d: the good subscriber got %d bytes, want %d", round, len(m.Payload), len(payload))
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

func logLatency(t *testing.T, lat []time.Duration) {
	slices.Sort(lat)
	t.Logf("well-behaved client: %d round trips, latency p50 %v p99 %v max %v", len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

// Issue 16, one memory budget: a stream's read buffers count against its connection's memory
// bound. A connection that opens 100 streams, each with the start of a 1.1 MB frame, holds at
// most its bound: the streams past it are answered ERROR (code 2) and end, the connection and its
// other streams stay, and a well-behaved client beside it keeps publishing large frames.
func TestStreamReadBuffersAreBoundedByTheConnection(t *testing.T) {
	const bound = 4 << 20
	const streams = 100
	f := start(t, func(o *listener.Options) {
		o.Budget = membudget.New(1 << 30)
		o.MaxConnectionMemory = bound
	})
	c := rt.Connect(t, f.addr, "admin-token")
	sub := rt.Subscribe(t, c, "good", "")
	pub := rt.Open(t, c)
	attacker := rt.Connect(t, f.addr, "admin-token")
	base := heapAfterGC()
	strs := halfFrames(attacker, streams)
	if len(strs) != streams {
		t.Fatalf("opened %d streams of %d", len(strs), streams)
	}
	lat := goodRoundTrips(t, pub, sub, 32)
	held := heapAfterGC() - base
	logLatency(t, lat)
	t.Logf("live heap grew by %d bytes with %d half-sent large frames on one connection (bound %d)", held, streams, bound)
	if held > 2*bound {
		t.Fatalf("half-sent frames of one connection hold %d bytes of live heap; bound %d", held, bound)
	}

	// At most bound/MaxFrameSize streams fit the bound; every other one is answered.
	refused := make(chan *riftproto.Error, streams)
	for _, s := range strs {
		go func() {
			body, err := wire.NewFrameReader(s, riftproto.MinFrameSize, riftproto.MaxFrameSize).Next()
			if err != nil {
				return // an accepted stream, ended with the connection
			}
			if fr, err := riftproto.Decode(riftproto.Opcode(body[0]), body[1:]); err == nil {
				if e, ok := fr.(*riftproto.Error); ok {
					refused <- e
				}
			}
		}()
	}
	for range streams - bound/riftproto.MaxFrameSize {
		e := <-refused
		if e.Code != riftproto.CodeOperation || !strings.Contains(e.Message, "memory bound") {
			t.Fatalf("refused stream: ERROR %v %q, want code 2 naming the memory bound", e.Code, e.Message)
		}
	}
	s := rt.Open(t, attacker) // the attacker's connection is still served
	s.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, s)
}

// Issue 16, one memory budget: the same streams count against the server-wide budget. When one
// connection's half-sent frames fill it, that connection is closed; a well-behaved client on
// another connection publishes large frames before and after. (Its frames while the budget is
// full and the cut connection still lets go may be refused: the headroom is an eighth of the
// budget, less than a few large frames — a CI run under the race detector saw its 512 KiB frame's
// stream reset there, so the test no longer publishes in that moment.)
func TestStreamReadBuffersAreBoundedByTheServer(t *testing.T) {
	const budget = 8 << 20
	f := start(t, func(o *listener.Options) { o.Budget = membudget.New(budget) })
	c := rt.Connect(t, f.addr, "admin-token")
	sub := rt.Subscribe(t, c, "good", "")
	pub := rt.Open(t, c)
	attacker := rt.Connect(t, f.addr, "admin-token")
	lat := goodRoundTrips(t, pub, sub, 8)
	base := heapAfterGC()
	halfFrames(attacker, 100) // 100 announced frames of 1.06 MiB: far past the budget
	held := heapAfterGC() - base
	t.Logf("live heap grew by %d bytes with half-sent large frames (server budget %d)", held, budget)
	if held > 2*budget {
		t.Fatalf("half-sent frames hold %d bytes of live heap; server budget %d", held, budget)
	}
	expectClosed(t, attacker, listener.CloseNormal)
	logLatency(t, append(lat, goodRoundTrips(t, pub, sub, 32)...))
}
