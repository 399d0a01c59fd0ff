package transport

import (
	"slices"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// Throttles over the wire (throttling.md). Limits are per hour, so that nothing regains room
// while a test runs: every count below is exact, with no timing involved.

const hourMs = 3_600_000

func perHour(n uint64) []fibp.ThrottleLimit {
	return []fibp.ThrottleLimit{{MaxDeliveries: n, WindowMs: hourMs}}
}

var merchantKey = fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "merchant"}}

func consumeWith(t *testing.T, c *rawClient, reqID uint32, queue string, ts ...fibp.ThrottleDeclaration) {
	t.Helper()
	c.Send(reqID, &fibp.Consume{Queue: queue, Credit: 100, Throttles: ts})
	if h, f := c.Next(); f.Opcode() != fibp.OpConsumeOk || h.RequestID != reqID {
		t.Fatalf("Consume answered %#v", f)
	}
}

func merchantMsg(queue, merchant string) fibp.EnqueueMessage {
	m := fibp.EnqueueMessage{Queue: queue, Payload: []byte(merchant)}
	if merchant != "" {
		m.Headers = map[string]string{"merchant": merchant}
	}
	return m
}

func TestThrottleDeclarationErrors(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	ok := fibp.ThrottleDeclaration{Name: "t", Limits: perHour(5)}
	with := func(f func(*fibp.ThrottleDeclaration)) fibp.ThrottleDeclaration {
		d := ok
		d.Limits = slices.Clone(ok.Limits)
		f(&d)
		return d
	}
	for name, ds := range map[string][]fibp.ThrottleDeclaration{
		"no limits":     {with(func(d *fibp.ThrottleDeclaration) { d.Limits = nil })},
		"zero max":      {with(func(d *fibp.ThrottleDeclaration) { d.Limits[0].MaxDeliveries = 0 })},
		"zero window":   {with(func(d *fibp.ThrottleDeclaration) { d.Limits[0].WindowMs = 0 })},
		"empty name":    {with(func(d *fibp.ThrottleDeclaration) { d.Name = "" })},
		"repeated name": {ok, ok},
		"dedup key kind": {with(func(d *fibp.ThrottleDeclaration) {
			d.Key = fibp.Key{{Kind: fibp.KeyPartKindPayloadHash}}
		})},
		"never applies": {with(func(d *fibp.ThrottleDeclaration) {
			d.Limits = append(d.Limits, fibp.ThrottleLimit{MaxDeliveries: 10, WindowMs: 1000})
		})},
	} {
		t.Run(name, func(t *testing.T) {
			c.Send(7, &fibp.Consume{Queue: "q", Throttles: ds})
			_, f := c.Next()
			expectError(t, f, fibp.CodeInvalidThrottle)
		})
	}

	keyed := fibp.ThrottleDeclaration{Name: "m", Limits: perHour(5), Key: merchantKey}
	consumeWith(t, c, 8, "q", keyed)
	other := dialRaw(t, addr)
	other.Handshake()
	for _, d := range []fibp.ThrottleDeclaration{
		{Name: "m", Limits: perHour(5), Key: fibp.Key{{Kind: fibp.KeyPartKindFairnessKey}}},
		{Name: "m", Limits: perHour(5), Key: merchantKey, WhenKeyMissing: fibp.WhenKeyMissingUnthrottled},
	} {
		other.Send(9, &fibp.Consume{Queue: "q", Throttles: []fibp.ThrottleDeclaration{d}})
		_, f := other.Next()
		expectError(t, f, fibp.CodeThrottleConflict)
	}
	// Limits may differ; and once the declaring subscription ends, another key is free.
	consumeWith(t, other, 10, "q", fibp.ThrottleDeclaration{Name: "m", Limits: perHour(1), Key: merchantKey})
	other.Send(10, &fibp.CancelConsume{})
	c.Send(8, &fibp.CancelConsume{})
	waitFor(t, func() bool {
		r := c.Call(11, &fibp.GetThrottleStats{Name: "m"}).(*fibp.GetThrottleStatsResult)
		return r.ErrorCode == fibp.CodeThrottleNotFound
	})
	consumeWith(t, other, 12, "q", fibp.ThrottleDeclaration{Name: "m", Limits: perHour(5), Key: fibp.Key{{Kind: fibp.KeyPartKindFairnessKey}}})
}

// Per-merchant 2 an hour under a global 5 an hour, messages without the header sharing one
// bucket: the first five go, in order; the rest wait, counted in GetStats, GetThrottleStats and
// GetThrottleBucket.
func TestKeyedThrottlesUnderAGlobalOne(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "pay"})
	var msgs []fibp.EnqueueMessage
	for _, m := range []string{"m1", "m2", "", "m1", "m2", "", "m1", "m2", "m1", "m2"} {
		msgs = append(msgs, merchantMsg("pay", m))
	}
	enqueue(t, c, msgs...)
	before := uint64(time.Now().UnixMilli())
	consumeWith(t, c, 3, "pay",
		fibp.ThrottleDeclaration{Name: "stripe", Limits: perHour(5)},
		fibp.ThrottleDeclaration{Name: "merchant", Limits: perHour(2), Key: merchantKey})
	var got []string
	for _, d := range c.Deliveries(5) {
		got = append(got, string(d.Payload))
	}
	if want := []string{"m1", "m2", "", "m1", "m2"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	s := stats(t, c, "pay")
	if s.Throttled != 5 || s.InFlight != 5 || len(s.ActiveThrottles) != 2 {
		t.Fatalf("GetStats: throttled %d, in flight %d, throttles %+v", s.Throttled, s.InFlight, s.ActiveThrottles)
	}
	if a := s.ActiveThrottles[0]; a.Name != "merchant" || a.DeclaringSubscribers != 1 || !slices.Equal(a.Key, merchantKey) ||
		!slices.Equal(a.Limits, perHour(2)) {
		t.Fatalf("summary %+v", a)
	}

	g := c.Call(4, &fibp.GetThrottleStats{Name: "stripe", TopBuckets: 10}).(*fibp.GetThrottleStatsResult)
	if g.ErrorCode != fibp.CodeOk || g.Waiting != 5 || g.ActiveBuckets != 1 || g.BucketsAtLimit != 1 ||
		len(g.Queues) != 1 || g.Queues[0].Queue != "pay" || len(g.Buckets) != 1 {
		t.Fatalf("stripe stats %+v", g)
	}
	if b := g.Buckets[0]; !slices.Equal(b.Counted, []uint64{5}) || b.Waiting != 5 || b.NextRoomAt < before+hourMs {
		t.Fatalf("stripe bucket %+v", b)
	}

	m := c.Call(5, &fibp.GetThrottleStats{Name: "merchant", TopBuckets: 2}).(*fibp.GetThrottleStatsResult)
	if m.Waiting != 5 || m.ActiveBuckets != 3 || m.BucketsAtLimit != 2 || len(m.Buckets) != 2 {
		t.Fatalf("merchant stats %+v", m)
	}
	for i, want := range []string{"m1", "m2"} {
		b := m.Buckets[i]
		if b.BucketKind != fibp.BucketKindKeyed || !slices.Equal(b.Values, []string{want}) || b.Waiting != 2 ||
			!slices.Equal(b.Counted, []uint64{2}) || b.NextRoomAt == 0 {
			t.Fatalf("merchant bucket %d: %+v", i, b)
		}
	}
	shared := c.Call(6, &fibp.GetThrottleBucket{Name: "merchant", BucketKind: fibp.BucketKindMissingKeyShared}).(*fibp.GetThrottleBucketResult)
	if b := shared.Bucket; shared.ErrorCode != fibp.CodeOk || !slices.Equal(b.Counted, []uint64{1}) || b.Waiting != 1 || b.NextRoomAt != 0 {
		t.Fatalf("shared bucket %+v", shared)
	}
	unused := c.Call(7, &fibp.GetThrottleBucket{Name: "merchant", Values: []string{"m3"}}).(*fibp.GetThrottleBucketResult)
	if b := unused.Bucket; !slices.Equal(b.Counted, []uint64{0}) || b.Waiting != 0 || b.NextRoomAt != 0 || !slices.Equal(b.Values, []string{"m3"}) {
		t.Fatalf("unused bucket %+v", unused)
	}
	missing := c.Call(8, &fibp.GetThrottleBucket{Name: "nope"}).(*fibp.GetThrottleBucketResult)
	if missing.ErrorCode != fibp.CodeThrottleNotFound {
		t.Fatalf("unknown throttle: %v", missing.ErrorCode)
	}
}

// One throttle declared on two queues is one set of buckets: what one queue delivered, the other
// cannot. When the stricter subscription ends, the looser limit applies to what is waiting.
func TestThrottleSharedAcrossQueues(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "a"})
	newQueue(t, c, &fibp.CreateQueue{Name: "b"})
	enqueue(t, c, merchantMsg("a", "x"), merchantMsg("a", "x"))
	consumeWith(t, c, 3, "a", fibp.ThrottleDeclaration{Name: "api", Limits: perHour(3)})
	c.Deliveries(2)

	d := dialRaw(t, addr)
	d.Handshake()
	consumeWith(t, d, 4, "b", fibp.ThrottleDeclaration{Name: "api", Limits: perHour(3)})
	enqueue(t, d, merchantMsg("b", "y"), merchantMsg("b", "y"), merchantMsg("b", "y"))
	if got := d.Deliveries(1); len(got) != 1 {
		t.Fatalf("queue b got %d deliveries, want the 1 left of 3", len(got))
	}
	if s := stats(t, d, "b"); s.Throttled != 2 || s.InFlight != 1 {
		t.Fatalf("queue b: throttled %d, in flight %d", s.Throttled, s.InFlight)
	}
	g := d.Call(5, &fibp.GetThrottleStats{Name: "api", TopBuckets: 1}).(*fibp.GetThrottleStatsResult)
	if g.Summary.DeclaringSubscribers != 2 || len(g.Queues) != 2 || g.Waiting != 2 || !slices.Equal(g.Buckets[0].Counted, []uint64{3}) {
		t.Fatalf("api stats %+v", g)
	}

	// A looser declaration joins on b; the strict ones end: 100 an hour now applies.
	e := dialRaw(t, addr)
	e.Handshake()
	consumeWith(t, e, 6, "b", fibp.ThrottleDeclaration{Name: "api", Limits: perHour(100)})
	c.Send(3, &fibp.CancelConsume{})
	d.Send(4, &fibp.CancelConsume{})
	if got := e.Deliveries(2); len(got) != 2 {
		t.Fatalf("after the strict subscriptions ended: %d deliveries", len(got))
	}
}

// when_key_missing = unthrottled lets messages without the key pass a keyed throttle.
func TestMissingKeyUnthrottled(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	enqueue(t, c, merchantMsg("q", "m"), merchantMsg("q", "m"), merchantMsg("q", ""), merchantMsg("q", ""), merchantMsg("q", ""))
	consumeWith(t, c, 3, "q", fibp.ThrottleDeclaration{Name: "m", Limits: perHour(1), Key: merchantKey,
		WhenKeyMissing: fibp.WhenKeyMissingUnthrottled})
	var got []string
	for _, d := range c.Deliveries(4) {
		got = append(got, string(d.Payload))
	}
	if want := []string{"m", "", "", ""}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	if s := stats(t, c, "q"); s.Throttled != 1 {
		t.Fatalf("throttled %d, want 1", s.Throttled)
	}
	shared := c.Call(4, &fibp.GetThrottleBucket{Name: "m", BucketKind: fibp.BucketKindMissingKeyShared}).(*fibp.GetThrottleBucketResult)
	if !slices.Equal(shared.Bucket.Counted, []uint64{0}) {
		t.Fatalf("unthrottled messages were counted in a shared bucket: %+v", shared.Bucket)
	}
}
