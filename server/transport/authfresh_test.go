package transport

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// A node of a cluster that cannot confirm its copy of the keys and ACLs is current (its key
// store's freshness test says so: auth.Store.Fresh) refuses keys with AuthStateStale: at the
// Handshake (the connection closes), and at every later request (the connection stays, and its
// subscriptions end with AuthStateStale, even one that sends nothing). The bootstrap key, from the
// node's own configuration, and Ping pass. Current again, it serves as before.
func TestAStaleNodeRefusesKeys(t *testing.T) {
	a := startAuthServer(t, Options{PingInterval: 100 * time.Millisecond, PongTimeout: time.Minute})
	var fresh atomic.Bool
	fresh.Store(true)
	a.b.Auth().SetFreshness(fresh.Load)

	admin := a.dial(bootKey)
	newQueue(t, admin, &fibp.CreateQueue{Name: "orders"})
	k := createKey(t, admin, "worker", 0, "produce", "orders", "consume", "orders")
	w := a.dial(k.Key)
	sameCodes(t, "fresh", enqueueCodes(t, w, 1, "orders"), fibp.CodeOk)
	consumer, idle := a.dial(k.Key), a.dial(k.Key)
	consumer.Subscribe(1, "orders", 1)
	if d := consumer.Deliveries(1); string(d[0].Payload) != "orders" {
		t.Fatalf("delivered %q", d[0].Payload)
	}
	idle.Subscribe(1, "orders", 0) // no credit: it will send nothing

	fresh.Store(false)
	expectError(t, w.Call(2, enqueueOf("orders")), fibp.CodeAuthStateStale)
	if _, ok := w.Call(3, &fibp.Ping{}).(*fibp.Pong); !ok {
		t.Fatal("a stale node's connection did not stay open for the next request")
	}
	for _, key := range []string{k.Key, "a key this node may not have heard of yet"} {
		c := dialRaw(t, a.addr)
		expectError(t, c.HandshakeKey(key), fibp.CodeAuthStateStale)
		if !c.Closed() {
			t.Fatal("the connection stayed open after the Handshake's AuthStateStale")
		}
	}
	if r := admin.Call(4, &fibp.ListAPIKeys{}).(*fibp.ListAPIKeysResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("the bootstrap key on a stale node: %v", r.ErrorCode)
	}
	a.dial(bootKey).NC.Close()

	consumer.Send(1, &fibp.Credit{AdditionalCredit: 1})
	for _, c := range []*rawClient{consumer, idle} { // idle's ends at a keepalive tick
		h, f := c.Next()
		if e, ok := f.(*fibp.Error); !ok || e.ErrorCode != fibp.CodeAuthStateStale || h.RequestID != 1 {
			t.Fatalf("a subscription on a stale node: %v %#v, want its end with AuthStateStale", h.Opcode, f)
		}
	}

	fresh.Store(true)
	sameCodes(t, "fresh again", enqueueCodes(t, w, 5, "orders"), fibp.CodeOk)
	consumer.Subscribe(6, "orders", 1)
	if d := consumer.Deliveries(1); string(d[0].Payload) != "orders" {
		t.Fatalf("delivered %q", d[0].Payload)
	}
	a.dial(k.Key).NC.Close()
}
