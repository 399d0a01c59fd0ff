package transport

import (
	"crypto/tls"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/internal/fibptest"
	"github.com/filamq/fila/server/membudget"
)

// Attacks through the wire: inputs a hostile client may send, each answered by the spec's error
// code while the server goes on serving.

// A window of up to 2^64 - 1 ms is a valid declaration; the first delivery through it used to
// divide by zero (or make a slice of negative length) on the queue's goroutine and kill the server.
func TestThrottleWindowsAtTheEdgeOfU64(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	for i, lim := range []fibp.ThrottleLimit{
		{MaxDeliveries: 65, WindowMs: math.MaxUint64}, // slotted
		{MaxDeliveries: 65, WindowMs: 1 << 63},
		{MaxDeliveries: 1, WindowMs: math.MaxUint64}, // exact
		{MaxDeliveries: math.MaxUint64, WindowMs: math.MaxUint64},
	} {
		t.Run(fmt.Sprint(lim), func(t *testing.T) {
			id := uint32(10 + i)
			consumeWith(t, c, id, "q", fibp.ThrottleDeclaration{Name: fmt.Sprint("t", i), Limits: []fibp.ThrottleLimit{lim}})
			enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})
			h, f := c.Next()
			d, ok := f.(*fibp.Delivery)
			if !ok || h.RequestID != id || len(d.Messages) != 1 {
				t.Fatalf("expected one delivery on %d, got %d %#v", id, h.RequestID, f)
			}
			c.Send(1, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q", MessageID: d.Messages[0].MessageID}}})
			if _, f := c.Next(); f.Opcode() != fibp.OpAckResult {
				t.Fatalf("Ack answered %#v", f)
			}
			c.Send(id, &fibp.CancelConsume{})
			c.Send(3, &fibp.Ping{}) // CancelConsume has no answer
			if _, f := c.Next(); f.Opcode() != fibp.OpPong {
				t.Fatalf("Ping answered %#v", f)
			}
		})
	}
}

// A Consume can carry 65,535 throttles of 65,535 limits each; validating and applying them was
// quadratic (20,000 limits took seconds of CPU), and every delivery walked them all. The counts
// are bounded: InvalidThrottle.
func TestThrottleDeclarationsAreBounded(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	limits := func(from, n int) []fibp.ThrottleLimit { // none implies another
		ls := make([]fibp.ThrottleLimit, n)
		for i := range ls {
			ls[i] = fibp.ThrottleLimit{MaxDeliveries: uint64(from + i + 1), WindowMs: uint64(from + i + 1)}
		}
		return ls
	}
	manyLimits := []fibp.ThrottleDeclaration{{Name: "t", Limits: limits(0, 60_000)}}
	var manyThrottles []fibp.ThrottleDeclaration
	for i := range 60_000 {
		manyThrottles = append(manyThrottles, fibp.ThrottleDeclaration{Name: fmt.Sprint("t", i), Limits: limits(0, 1)})
	}
	for name, ds := range map[string][]fibp.ThrottleDeclaration{"limits": manyLimits, "throttles": manyThrottles} {
		c.Send(5, &fibp.Consume{Queue: "q", Throttles: ds})
		_, f := c.Next()
		t.Logf("%d %s: %v", 60_000, name, expectError(t, f, fibp.CodeInvalidThrottle).Message)
	}
	// The union of one throttle's limits across subscriptions is bounded too.
	for i := range 4 {
		consumeWith(t, c, uint32(10+i), "q", fibp.ThrottleDeclaration{Name: "shared", Limits: limits(16*i, 16)})
	}
	c.Send(20, &fibp.Consume{Queue: "q", Throttles: []fibp.ThrottleDeclaration{{Name: "shared", Limits: limits(64, 1)}}})
	_, f := c.Next()
	expectError(t, f, fibp.CodeInvalidThrottle)
	consumeWith(t, c, 21, "q", fibp.ThrottleDeclaration{Name: "shared", Limits: limits(0, 16)}) // limits it already has
}

// A consumer whose key is revoked, or whose ACL loses the queue, must stop receiving at once: it
// need not send another request for the change to reach its subscriptions. Before, a subscription
// lived on with a revoked key as long as the client only answered Pings (server-managed credit
// refills without acks), reading every new message of the queue.
func TestRevocationEndsSubscriptionsWithoutARequest(t *testing.T) {
	a := startAuthServer(t, Options{})
	admin := a.dial(bootKey)
	newQueue(t, admin, &fibp.CreateQueue{Name: "orders"})
	newQueue(t, admin, &fibp.CreateQueue{Name: "invoices"})
	unread := func(queue string, want uint64) {
		t.Helper()
		if s := stats(t, admin, queue); s.Depth != want || s.InFlight != 0 {
			t.Fatalf("%s: depth %d, in flight %d; want %d unread", queue, s.Depth, s.InFlight, want)
		}
	}

	k := createKey(t, admin, "reader", 0, "consume", "orders", "consume", "invoices")
	w := a.dial(k.Key)
	w.Subscribe(1, "orders", 0)
	w.Subscribe(2, "invoices", 0)
	setACL(t, admin, k.KeyID, "consume", "invoices")
	h, f := w.Next()
	if e := expectError(t, f, fibp.CodeForbidden); h.RequestID != 1 {
		t.Fatalf("losing consume on orders answered request %d: %q", h.RequestID, e.Message)
	}
	enqueue(t, admin, fibp.EnqueueMessage{Queue: "orders", Payload: []byte("secret")})
	unread("orders", 1)
	if got := w.Call(3, &fibp.Ping{}); got.Opcode() != fibp.OpPong { // invoices goes on
		t.Fatalf("Ping answered %#v", got)
	}

	if r := admin.Call(4, &fibp.RevokeAPIKey{KeyID: k.KeyID}).(*fibp.RevokeAPIKeyResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("RevokeApiKey: %v", r.ErrorCode)
	}
	h, f = w.Next() // the subscription ends at once...
	if e := expectError(t, f, fibp.CodeUnauthorized); h.RequestID != 2 {
		t.Fatalf("the revocation answered request %d: %q", h.RequestID, e.Message)
	}
	enqueue(t, admin, fibp.EnqueueMessage{Queue: "invoices", Payload: []byte("secret")})
	unread("invoices", 1)
	expectError(t, w.Call(5, &fibp.Ping{}), fibp.CodeUnauthorized) // ...the connection at its next request
	if !w.Closed() {
		t.Fatal("a revoked key's connection stayed open")
	}
}

// An expiring key's subscriptions end once it expires, also without a request (keepalive's tick
// checks the key; the clock is the injected one).
func TestExpiryEndsSubscriptionsWithoutARequest(t *testing.T) {
	a := startAuthServer(t, Options{PingInterval: 20 * time.Millisecond})
	admin := a.dial(bootKey)
	newQueue(t, admin, &fibp.CreateQueue{Name: "orders"})
	k := createKey(t, admin, "temp", uint64(a.clock.Now().Add(time.Hour).UnixMilli()), "consume", "orders")
	w := a.dial(k.Key)
	w.Subscribe(1, "orders", 0)
	a.clock.Advance(time.Hour)
	h, f := w.Next()
	if e := expectError(t, f, fibp.CodeUnauthorized); h.RequestID != 1 {
		t.Fatalf("the expiry answered request %d: %q", h.RequestID, e.Message)
	}
	enqueue(t, admin, fibp.EnqueueMessage{Queue: "orders", Payload: []byte("secret")})
	if s := stats(t, admin, "orders"); s.Depth != 1 || s.InFlight != 0 {
		t.Fatalf("depth %d, in flight %d; want 1 unread", s.Depth, s.InFlight)
	}
}

// Connections that never finish their handshake (a slowloris, all from the client's own address,
// as every local client shares 127.0.0.1) cannot lock a client out: at the per-client limit the
// oldest connection still in its handshake gives its slot to the new one.
func TestIdleHandshakesDoNotLockOutAClient(t *testing.T) {
	const limit = 8
	a := startAuthServer(t, Options{MaxPerClient: limit, HandshakeTimeout: time.Hour})
	idle := make([]*rawClient, 3*limit)
	for i := range idle {
		idle[i] = dialRaw(t, a.addr)
		idle[i].SendBytes([]byte{0, 0, 0}) // part of a length prefix
	}
	w := a.dial(bootKey) // a well-behaved client gets in, and works
	newQueue(t, w, &fibp.CreateQueue{Name: "q"})
	for i, c := range idle[:2*limit+1] {
		if !c.Closed() {
			t.Fatalf("idle connection %d of %d is still open", i+1, len(idle))
		}
	}
	for range limit - 1 { // the slots that handshakes hold are kept
		a.dial(bootKey)
	}
	if !dialRaw(t, a.addr).Closed() {
		t.Fatal("a connection past the limit was accepted although every slot finished its handshake")
	}
	enqueue(t, w, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})
}

// A keyed throttle with a long window keeps a bucket per key value it delivered; a consumer fed
// messages with ever new values made that state grow without end (and kept it, dormant, after the
// subscription ended). It is bounded: past the bound a delivery that needs a new bucket waits,
// dormant buckets giving way first.
func TestThrottleBucketsAreBounded(t *testing.T) {
	bo := broker.DefaultOptions(t.TempDir())
	bo.Sync, bo.ThrottleMemory = false, 8<<10
	_, _, addr, stop := serveAt(t, bo, Options{})
	t.Cleanup(stop)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	const n = 200
	msgs := make([]fibp.EnqueueMessage, n)
	for i := range msgs {
		msgs[i] = merchantMsg("q", fmt.Sprint("m", i))
	}
	enqueue(t, c, msgs...)
	settled := func(want uint64) func() bool {
		return func() bool { s := stats(t, c, "q"); return s.InFlight+s.Throttled == want }
	}
	first := dialRaw(t, addr)
	first.Handshake()
	consumeWith(t, first, 10, "q", fibp.ThrottleDeclaration{Name: "m", Limits: perHour(1), Key: merchantKey})
	eventually(t, "every message delivered or throttled", settled(n))
	const most = 8 << 10 / 200 // a bucket takes more than 200 bytes
	if s := stats(t, c, "q"); s.InFlight == 0 || s.InFlight > most {
		t.Fatalf("%d of %d messages with distinct keys delivered under an 8 KiB bound; want 1..%d", s.InFlight, n, most)
	}
	// More limits on "m" would give each of its buckets more windows: refused past the bound.
	more := make([]fibp.ThrottleLimit, 16)
	for i := range more {
		more[i] = fibp.ThrottleLimit{MaxDeliveries: uint64(i + 2), WindowMs: hourMs + uint64(i+1)}
	}
	other := dialRaw(t, addr)
	other.Handshake()
	other.Send(13, &fibp.Consume{Queue: "q", Throttles: []fibp.ThrottleDeclaration{{Name: "m", Limits: more, Key: merchantKey}}})
	_, f := other.Next()
	expectError(t, f, fibp.CodeChannelFull) // well formed: the server is full for now, not the declaration wrong
	first.Send(10, &fibp.CancelConsume{})   // "m" goes dormant, its buckets kept
	first.Send(11, &fibp.Ping{})
	for h, _ := first.Next(); h.RequestID != 11; h, _ = first.Next() {
	}
	delivered := stats(t, c, "q").InFlight
	second := dialRaw(t, addr)
	second.Handshake()
	consumeWith(t, second, 12, "q", fibp.ThrottleDeclaration{Name: "other", Limits: perHour(1), Key: merchantKey})
	eventually(t, "a new throttle finds room: the dormant buckets give way", func() bool { return stats(t, c, "q").InFlight > delivered })
}

// Queue names are 1–255 bytes. A name past 127 bytes used to fail CreateQueue with StorageError:
// its snapshot directory, the name in hex, was longer than a file name may be.
func TestLongQueueNamesWork(t *testing.T) {
	bo := broker.DefaultOptions(t.TempDir())
	bo.Sync = false
	_, _, addr, stop := serveAt(t, bo, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	names := []string{strings.Repeat("n", 127), strings.Repeat("o", 128), strings.Repeat("p", 255)}
	for _, name := range names {
		newQueue(t, c, &fibp.CreateQueue{Name: name})
		enqueue(t, c, fibp.EnqueueMessage{Queue: name, Payload: []byte("x")})
	}
	stop()
	_, _, addr, stop = serveAt(t, bo, Options{})
	t.Cleanup(stop)
	c = dialRaw(t, addr)
	c.Handshake()
	for _, name := range names {
		if s := stats(t, c, name); s.Depth != 1 {
			t.Fatalf("queue of %d bytes: depth %d after a restart", len(name), s.Depth)
		}
		if r := c.Call(3, &fibp.DeleteQueue{Queue: name}).(*fibp.DeleteQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("DeleteQueue of %d bytes: %v", len(name), r.ErrorCode)
		}
		newQueue(t, c, &fibp.CreateQueue{Name: name})
	}
}

// Keys have at most keys.MaxParts parts. Checking 20,000 parts for repeats took 0.6 s of CPU
// (65,535, the wire's most, about 6 s) per throttle of a Consume, or per key of a CreateQueue.
func TestKeysWithManyPartsAreRefused(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	var k fibp.Key
	for i := range 60_000 {
		k = append(k, fibp.KeyPart{Kind: fibp.KeyPartKindHeader, Name: fmt.Sprint("h", i)})
	}
	c.Send(1, &fibp.Consume{Queue: "q", Throttles: []fibp.ThrottleDeclaration{{Name: "t", Limits: perHour(5), Key: k}}})
	_, f := c.Next()
	t.Log(expectError(t, f, fibp.CodeInvalidThrottle).Message)
	for _, cq := range []*fibp.CreateQueue{{Name: "o", Ordering: 2, OrderingKey: k}, {Name: "d", DedupKey: k}} {
		expectError(t, c.Call(2, cq), fibp.CodeInvalidConfigValue)
	}
	consumeWith(t, c, 3, "q", fibp.ThrottleDeclaration{Name: "t", Limits: perHour(5), Key: k[:16]})
}

// The wake that brings a key change to a quiet connection (a read deadline in the past) must not
// break a frame the client is in the middle of sending, over TCP or TLS.
func TestKeyChangeWakeKeepsAPartialFrame(t *testing.T) {
	cert, roots := devTLS(t)
	for name, tc := range map[string]*tls.Config{"tcp": nil, "tls": {Certificates: []tls.Certificate{cert}}} {
		t.Run(name, func(t *testing.T) {
			a := startAuthServer(t, Options{TLS: tc, MaxFrameSize: 64 << 10})
			dial := func() *rawClient {
				if tc == nil {
					return dialRaw(t, a.addr)
				}
				nc, err := tls.Dial("tcp", a.addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				return &fibptest.Client{T: t, NC: nc, FR: wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)}
			}
			admin := dial()
			admin.HandshakeKey(bootKey)
			newQueue(t, admin, &fibp.CreateQueue{Name: "a"})
			newQueue(t, admin, &fibp.CreateQueue{Name: "b"})
			k := createKey(t, admin, "reader", 0, "consume", "a", "consume", "b")
			w := dial()
			if f, ok := w.HandshakeKey(k.Key).(*fibp.HandshakeOk); !ok {
				t.Fatalf("handshake: %#v", f)
			}
			w.Subscribe(1, "a", 0)
			w.Subscribe(2, "b", 0)
			ping := fibp.AppendFrame(nil, 0, 7, &fibp.Ping{})
			w.SendBytes(ping[:5])
			setACL(t, admin, k.KeyID, "consume", "b")
			if h, f := w.Next(); h.RequestID != 1 {
				t.Fatalf("the ACL change answered %d: %#v", h.RequestID, f)
			} else {
				expectError(t, f, fibp.CodeForbidden)
			}
			w.SendBytes(ping[5:])
			if h, f := w.Next(); h.RequestID != 7 || f.Opcode() != fibp.OpPong {
				t.Fatalf("the Ping split around the wake answered %d %#v", h.RequestID, f)
			}
			enqueue(t, admin, fibp.EnqueueMessage{Queue: "b", Payload: []byte("x")})
			w.Deliveries(1) // b goes on

			// A wake while the server discards an oversized frame's body: the frame is still
			// answered (InvalidFrame, its request ID) and the connection goes on.
			big := fibp.AppendFrame(nil, 0, 9, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "b", Payload: make([]byte, 100<<10)}}})
			w.SendBytes(big[:50<<10])
			setACL(t, admin, k.KeyID, "consume", "b", "produce", "b")
			w.SendBytes(big[50<<10:])
			h, f := w.Next()
			if e := expectError(t, f, fibp.CodeInvalidFrame); h.RequestID != 9 {
				t.Fatalf("the oversized frame was answered on %d: %q", h.RequestID, e.Message)
			}
			if got := w.Call(8, &fibp.Ping{}); got.Opcode() != fibp.OpPong {
				t.Fatalf("Ping answered %#v", got)
			}
		})
	}
}

// Before its handshake a client may send one frame no larger than the largest Handshake (about 64 KiB): a length prefix of up to
// MaxFrameSize made the server reserve that much of the shared memory budget for a client with
// no key, so that a few hundred such connections filled it and others were refused memory.
func TestUnauthenticatedClientsCannotReserveLargeFrames(t *testing.T) {
	budget := membudget.New(4 << 30)
	_, addr := startServer(t, Options{Budget: budget})
	before := budget.Used()
	const n = 50
	head := fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: fibp.Version})[:4+fibp.HeaderSize]
	head[0], head[1], head[2], head[3] = 0, 0xff, 0, 0 // a 16,711,680-byte Handshake
	for range n {
		c := dialRaw(t, addr)
		c.SendBytes(head)
		_, f := c.Next() // answered at once, not after its body
		expectError(t, f, fibp.CodeInvalidFrame)
		if !c.Closed() {
			t.Fatal("the connection stayed open")
		}
	}
	held := make([]*rawClient, n) // and connections that send such a prefix and wait hold little
	for i := range held {
		held[i] = dialRaw(t, addr)
		held[i].SendBytes(head[:4])
	}
	w := dialRaw(t, addr)
	w.Handshake()
	if used := budget.Used() - before; used > (n+1)*(connMemory+maxHandshakeFrame) {
		t.Fatalf("%d connections without a handshake hold %d bytes of the budget", n, used)
	}
}

// Subscriptions count against the connection's (and the server's) memory bound while they live.
func TestSubscriptionsCountAgainstTheMemoryBound(t *testing.T) {
	const room = 8
	_, addr := startServer(t, Options{MaxConnectionMemory: connMemory + room*subscriptionMemory + subscriptionMemory/2}) // the half: answers queued
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	for i := range room {
		c.Subscribe(uint32(10+i), "q", 1)
	}
	c.Send(30, &fibp.Consume{Queue: "q", Credit: 1})
	_, f := c.Next()
	if e := expectError(t, f, fibp.CodeChannelFull); e.Metadata[fibp.MetaRetryAfterMs] == "" {
		t.Fatalf("no retry_after_ms: %+v", e)
	}
	c.Send(10, &fibp.CancelConsume{})
	c.Subscribe(31, "q", 1) // the cancelled one's room is free again
}
