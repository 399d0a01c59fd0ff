package listener_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
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
