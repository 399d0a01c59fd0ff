package transport

// Admin frames, encoded and decoded by hand from the FIBP specification (see conformance_test.go).

import (
	"strings"
	"testing"
)

// handshakeKey sends a version-1 Handshake presenting key and checks HandshakeOk.
func (c *specConn) handshakeKey(key string) {
	c.t.Helper()
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(1).u8(1).str(key).u32(1)))
	c.expect(0x02, 0)
}

func TestSpecGetStatsBytes(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	c.enqueue(2, enqueueBody("q", "a", "b"))
	c.write(rawFrame(0xF9, 0, 3, be(nil).str("q")))
	r := c.expect(0xF8, 3)
	code, depth, inFlight, delayed, unclassified, oldest, throttled := r.u8(), r.u64(), r.u64(), r.u64(), r.u64(), r.u64(), r.u64()
	if code != 0 || depth != 2 || inFlight != 0 || delayed != 0 || unclassified != 0 || oldest != 0 || throttled != 0 {
		t.Fatalf("GetStatsResult code %#02x depth %d in_flight %d delayed %d unclassified %d oldest %d throttled %d",
			code, depth, inFlight, delayed, unclassified, oldest, throttled)
	}
	keys, consumers, quantum, leader, replication := r.u64(), r.u32(), r.u32(), r.u64(), r.u32()
	if keys != 1 || consumers != 0 || quantum != 1 || leader != 0 || replication != 0 {
		t.Fatalf("active_fairness_keys %d active_consumers %d quantum %d leader %d replication %d", keys, consumers, quantum, leader, replication)
	}
	if n := r.u32(); n != 1 {
		t.Fatalf("per_key_stats_count %d", n)
	}
	if k, pending := r.str(), r.u64(); k != "default" || pending != 2 {
		t.Fatalf("per-key stat %q pending %d", k, pending)
	}
	r.u64() // current_deficit
	if w := r.u32(); w != 1 {
		t.Fatalf("per-key weight %d", w)
	}
	if n := r.u32(); n != 0 {
		t.Fatalf("active_throttle_count %d", n)
	}
	// Whatever follows are appended fields, which a reader of version 1 ignores.

	c.write(rawFrame(0xF9, 0, 4, be(nil).str("nope")))
	if code := c.expect(0xF8, 4).u8(); code != 0x01 {
		t.Fatalf("GetStats of a missing queue: %#02x, want QueueNotFound", code)
	}
}

func TestSpecQueueAdminBytes(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")

	c.write(rawFrame(0xFD, 0, 2, createQueueBody("q")))
	if r := c.expect(0xFC, 2); r.u8() != 0x03 || r.str() != "" {
		t.Fatal("CreateQueue of a taken name: want QueueAlreadyExists and an empty queue_id")
	}
	c.write(rawFrame(0xFD, 0, 3, createQueueBody("x.dlq")))
	if r := c.expect(0xFC, 3); r.u8() != 0x16 {
		t.Fatal("CreateQueue of a .dlq name: want ReservedQueueName")
	}

	c.write(rawFrame(0xF7, 0, 4, nil))
	r := c.expect(0xF6, 4)
	if code, nodes, n := r.u8(), r.u32(), r.u32(); code != 0 || nodes != 0 || n != 2 {
		t.Fatalf("ListQueuesResult code %#02x cluster_node_count %d queue_count %d (q and q.dlq)", code, nodes, n)
	}
	names := map[string]bool{}
	for range 2 {
		names[r.str()] = true
		r.u64()
		r.u64()
		r.u32()
		if leader := r.u64(); leader != 0 {
			t.Fatalf("leader_node_id %d on a single node", leader)
		}
	}
	r.end()
	if !names["q"] || !names["q.dlq"] {
		t.Fatalf("ListQueues names %v", names)
	}

	// UpdateQueue: every optional field absent, then one set.
	upd := be(nil).str("q").u8(0).text("").u8(0).text("")
	unchanged := upd
	for range 9 {
		unchanged = unchanged.u8(0)
	}
	c.write(rawFrame(0xDF, 0, 5, unchanged))
	if r := c.expect(0xDE, 5); r.u8() != 0 {
		t.Fatal("UpdateQueue changing nothing failed")
	}
	set := be(nil).raw(upd).u8(1).u64(5000)
	for range 8 {
		set = set.u8(0)
	}
	c.write(rawFrame(0xDF, 0, 6, set))
	if r := c.expect(0xDE, 6); r.u8() != 0 {
		t.Fatal("UpdateQueue of visibility_timeout_ms failed")
	}
	missing := be(nil).str("nope").u8(0).text("").u8(0).text("")
	for range 9 {
		missing = missing.u8(0)
	}
	c.write(rawFrame(0xDF, 0, 7, missing))
	if r := c.expect(0xDE, 7); r.u8() != 0x01 {
		t.Fatal("UpdateQueue of a missing queue: want QueueNotFound")
	}

	c.write(rawFrame(0xEF, 0, 8, be(nil).str("q").u64(0).u8(0)))
	if r := c.expect(0xEE, 8); r.u8() != 0x06 {
		t.Fatal("Redrive of a queue that is not a DLQ: want NotADLQ")
	}
	c.write(rawFrame(0xEF, 0, 9, be(nil).str("q.dlq").u64(0).u8(0)))
	r = c.expect(0xEE, 9)
	if code, a, b, d := r.u8(), r.u64(), r.u64(), r.u64(); code != 0 || a != 0 || b != 0 || d != 0 {
		t.Fatalf("Redrive of an empty DLQ: %#02x %d %d %d", code, a, b, d)
	}
	r.end()

	c.write(rawFrame(0xFB, 0, 10, be(nil).str("q")))
	if r := c.expect(0xFA, 10); r.u8() != 0 {
		t.Fatal("DeleteQueue failed")
	}
	c.write(rawFrame(0xFB, 0, 11, be(nil).str("q")))
	if r := c.expect(0xFA, 11); r.u8() != 0x01 {
		t.Fatal("DeleteQueue of a missing queue: want QueueNotFound")
	}
}

func TestSpecConfigBytes(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.write(rawFrame(0xF5, 0, 1, be(nil).str("app.colour").str("blue")))
	if r := c.expect(0xF4, 1); r.u8() != 0 {
		t.Fatal("SetConfig failed")
	}
	c.write(rawFrame(0xF3, 0, 2, be(nil).str("app.colour")))
	r := c.expect(0xF2, 2)
	if code, v := r.u8(), r.str(); code != 0 || v != "blue" {
		t.Fatalf("GetConfigResult %#02x %q", code, v)
	}
	r.end()
	c.write(rawFrame(0xF3, 0, 3, be(nil).str("app.unset")))
	r = c.expect(0xF2, 3)
	if code, v := r.u8(), r.str(); code != 0x08 || v != "" {
		t.Fatalf("GetConfig of an unset key: %#02x %q, want InvalidConfigValue and empty", code, v)
	}
	c.write(rawFrame(0xF1, 0, 4, be(nil).str("app.")))
	r = c.expect(0xF0, 4)
	if code, n := r.u8(), r.u32(); code != 0 || n != 1 {
		t.Fatalf("ListConfigResult %#02x count %d", code, n)
	}
	if k, v := r.str(), r.str(); k != "app.colour" || v != "blue" {
		t.Fatalf("ListConfig entry %q=%q", k, v)
	}
	r.end()
}

func TestSpecClusterAdminBytesOnASingleNode(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")

	c.write(rawFrame(0xDD, 0, 2, be(nil).u32(1).str("q")))
	r := c.expect(0xDC, 2)
	if code, n := r.u8(), r.u32(); code != 0 || n != 1 {
		t.Fatalf("GetRoutesResult %#02x entry_count %d", code, n)
	}
	if q, leader, leaderAddr, shards := r.str(), r.u64(), r.str(), r.u32(); q != "q" || leader != 0 || leaderAddr == "" || shards != 0 {
		t.Fatalf("route %q leader %d %q shards %d", q, leader, leaderAddr, shards)
	}
	r.end()

	c.write(rawFrame(0xD5, 0, 3, nil))
	r = c.expect(0xD4, 3)
	if code, meta, mode, ends, n := r.u8(), r.u64(), r.u8(), r.u64(), r.u32(); code != 0 || meta != 0 || mode != 0 || ends != 0 || n != 1 {
		t.Fatalf("GetClusterStatusResult %#02x meta %d mode %d ends %d nodes %d", code, meta, mode, ends, n)
	}
	if id, a, state, lead := r.u64(), r.str(), r.u8(), r.u32(); id != 0 || a == "" || state != 0 || lead != 2 {
		t.Fatalf("node %d %q state %d queue_leaderships %d (q and q.dlq)", id, a, state, lead)
	}
	r.end()

	c.write(rawFrame(0xD7, 0, 4, be(nil).u8(1).u64(60_000)))
	if r := c.expect(0xD6, 4); r.u8() != 0 {
		t.Fatal("SetRebalancing pause failed")
	}
	c.write(rawFrame(0xDB, 0, 5, be(nil).u64(42).u8(1)))
	if r := c.expect(0xDA, 5); r.u8() != 0x1B {
		t.Fatal("DrainNode of an unknown node: want NodeNotFound")
	}
	c.write(rawFrame(0xD9, 0, 6, be(nil).str("nope").u64(0)))
	if r := c.expect(0xD8, 6); r.u8() != 0x01 {
		t.Fatal("MoveQueueLeader of a missing queue: want QueueNotFound")
	}
	c.write(rawFrame(0xD9, 0, 7, be(nil).str("q").u64(42)))
	if r := c.expect(0xD8, 7); r.u8() != 0x1B {
		t.Fatal("MoveQueueLeader to an unknown node: want NodeNotFound")
	}
}

func TestSpecThrottleAdminBytes(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	// Consume declaring throttle "api": 10 per 1000 ms, keyed by header "m", missing key shared.
	decl := be(nil).str("q").u32(0).u16(1).str("api").u16(1).u64(10).u64(1000).u16(1).u8(0).str("m").u8(0)
	c.write(rawFrame(0x12, 0, 2, decl))
	c.expect(0x13, 2)

	c.write(rawFrame(0xE3, 0, 3, be(nil).str("api").u32(5)))
	r := c.expect(0xE2, 3)
	if code := r.u8(); code != 0 {
		t.Fatalf("GetThrottleStatsResult %#02x", code)
	}
	name, limits := r.str(), r.u16()
	if name != "api" || limits != 1 {
		t.Fatalf("summary %q limit_count %d", name, limits)
	}
	if n, w := r.u64(), r.u64(); n != 10 || w != 1000 {
		t.Fatalf("limit %d/%d", n, w)
	}
	if parts, kind, hdr, missing, subs := r.u16(), r.u8(), r.str(), r.u8(), r.u32(); parts != 1 || kind != 0 || hdr != "m" || missing != 0 || subs != 1 {
		t.Fatalf("key %d parts kind %d %q when_key_missing %d declaring_subscribers %d", parts, kind, hdr, missing, subs)
	}
	if n, q := r.u32(), r.str(); n != 1 || q != "q" {
		t.Fatalf("queues %d %q", n, q)
	}
	r.u64()
	r.u64()
	r.u64()
	if n := r.u32(); n != 0 {
		t.Fatalf("%d buckets with nothing delivered", n)
	}
	r.end()

	c.write(rawFrame(0xE1, 0, 4, be(nil).str("api").u8(0).u16(1).str("x")))
	r = c.expect(0xE0, 4)
	if code, kind, nv, v, nl, counted, waiting, next := r.u8(), r.u8(), r.u16(), r.str(), r.u16(), r.u64(), r.u64(), r.u64(); code != 0 ||
		kind != 0 || nv != 1 || v != "x" || nl != 1 || counted != 0 || waiting != 0 || next != 0 {
		t.Fatalf("GetThrottleBucketResult %#02x kind %d values %d %q limits %d counted %d waiting %d next %d", code, kind, nv, v, nl, counted, waiting, next)
	}
	r.end()

	c.write(rawFrame(0xE3, 0, 5, be(nil).str("other").u32(0)))
	if code := c.expect(0xE2, 5).u8(); code != 0x18 {
		t.Fatalf("GetThrottleStats of an undeclared throttle: %#02x, want ThrottleNotFound", code)
	}

	// A malformed declaration: zero limits.
	bad := be(nil).str("q").u32(0).u16(1).str("b").u16(0).u16(0).u8(0)
	c.write(rawFrame(0x12, 0, 6, bad))
	c.expectError(6, 0x17)
	// Same name, different key.
	conflict := be(nil).str("q").u32(0).u16(1).str("api").u16(1).u64(10).u64(1000).u16(0).u8(0)
	c.write(rawFrame(0x12, 0, 7, conflict))
	c.expectError(7, 0x12)
}

func TestSpecAPIKeyAdminBytes(t *testing.T) {
	a := startAuthServer(t, Options{})
	c := dialSpec(t, a.addr)
	c.handshakeKey(bootKey)

	c.write(rawFrame(0xED, 0, 1, be(nil).str("producer").u64(0).u8(0)))
	r := c.expect(0xEC, 1)
	code, id, secret, super := r.u8(), r.str(), r.str(), r.u8()
	if code != 0 || id == "" || secret == "" || super != 0 {
		t.Fatalf("CreateApiKeyResult %#02x %q secret %d bytes superadmin %d", code, id, len(secret), super)
	}
	r.end()

	c.write(rawFrame(0xE7, 0, 2, be(nil).str(id).u32(1).str("produce").str("orders*")))
	if r := c.expect(0xE6, 2); r.u8() != 0 {
		t.Fatal("SetAcl failed")
	}
	c.write(rawFrame(0xE7, 0, 3, be(nil).str(id).u32(1).str("fly").str("*")))
	if msg, _ := c.expectError(3, 0x08); !strings.Contains(msg, `"fly"`) { // the reason: an Error frame
		t.Fatalf("SetAcl with an unknown kind: %q", msg)
	}
	c.write(rawFrame(0xE7, 0, 4, be(nil).str("nokey").u32(0)))
	if r := c.expect(0xE6, 4); r.u8() != 0x0F {
		t.Fatal("SetAcl of an unknown key: want ApiKeyNotFound")
	}
	c.write(rawFrame(0xE5, 0, 5, be(nil).str(id)))
	r = c.expect(0xE4, 5)
	if code, kid, super, n := r.u8(), r.str(), r.u8(), r.u32(); code != 0 || kid != id || super != 0 || n != 1 {
		t.Fatalf("GetAclResult %#02x %q %d %d", code, kid, super, n)
	}
	if kind, pat := r.str(), r.str(); kind != "produce" || pat != "orders*" {
		t.Fatalf("permission %q %q", kind, pat)
	}
	r.end()
	c.write(rawFrame(0xE5, 0, 6, be(nil).str("nokey")))
	if r := c.expect(0xE4, 6); r.u8() != 0x0F {
		t.Fatal("GetAcl of an unknown key: want ApiKeyNotFound")
	}

	c.write(rawFrame(0xE9, 0, 7, nil))
	r = c.expect(0xE8, 7)
	if code := r.u8(); code != 0 {
		t.Fatalf("ListApiKeysResult %#02x", code)
	}
	found := false
	for n := r.u32(); n > 0; n-- {
		kid, name, created, expires, super := r.str(), r.str(), r.u64(), r.u64(), r.u8()
		if kid == id {
			found = name == "producer" && created != 0 && expires == 0 && super == 0
		}
	}
	r.end()
	if !found {
		t.Fatal("ListApiKeys does not list the new key as created")
	}

	// The new key: produce on orders* only; anything else Forbidden, admin needs superadmin.
	p := dialSpec(t, a.addr)
	p.handshakeKey(secret)
	p.write(rawFrame(0xED, 0, 1, be(nil).str("x").u64(0).u8(0)))
	p.expectError(1, 0x0B)
	p.write(rawFrame(0x12, 0, 2, be(nil).str("orders").u32(0).u16(0)))
	p.expectError(2, 0x0B)

	c.write(rawFrame(0xEB, 0, 8, be(nil).str(id)))
	if r := c.expect(0xEA, 8); r.u8() != 0 {
		t.Fatal("RevokeApiKey failed")
	}
	c.write(rawFrame(0xEB, 0, 9, be(nil).str(id)))
	if r := c.expect(0xEA, 9); r.u8() != 0x0F {
		t.Fatal("RevokeApiKey of a revoked key: want ApiKeyNotFound")
	}
	// Revocation takes effect on the open connection at its next request.
	p.write(rawFrame(0x03, 0, 3, nil))
	p.expectError(3, 0x0A)
	p.expectClosed()

	// Missing and unknown keys: Unauthorized, then the connection closes.
	for _, hs := range []be{be(nil).u16(1).u8(0).u32(1), be(nil).u16(1).u8(1).str("wrong").u32(1)} {
		u := dialSpec(t, a.addr)
		u.write(rawFrame(0x01, 0, 0, hs))
		u.expectError(0, 0x0A)
		u.expectClosed()
	}
}
