package transport

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
)

// Throttles between tenants: names are protected by the throttle permission (security.md), so
// one tenant can neither tighten another's throttle nor squat its name.

// tenants is a server with authentication on, the queues a.q and b.q, and two keys: tenant a may
// consume a.* and declare throttles a.*, tenant b the same on b.*.
func tenants(t *testing.T) (srv *authServer, admin, a, b *rawClient) {
	t.Helper()
	srv = startAuthServer(t, Options{})
	admin = srv.dial(bootKey)
	newQueue(t, admin, &fibp.CreateQueue{Name: "a.q"})
	newQueue(t, admin, &fibp.CreateQueue{Name: "b.q"})
	ka := createKey(t, admin, "tenant-a", 0, "consume", "a.*", "throttle", "a.*")
	kb := createKey(t, admin, "tenant-b", 0, "consume", "b.*", "throttle", "b.*")
	return srv, admin, srv.dial(ka.Key), srv.dial(kb.Key)
}

// A Consume declaring a throttle needs the throttle permission on its name, whatever the queue:
// tenant b may neither add its limit of 1 an hour to tenant a's throttle nor take a name of
// a's. Before, both were accepted (the first tightening a's throttle to 1 an hour, the second
// leaving a ThrottleConflict for a).
func TestDeclaringAThrottleNeedsThePermissionOnItsName(t *testing.T) {
	_, admin, a, b := tenants(t)
	consumeWith(t, a, 1, "a.q", fibp.ThrottleDeclaration{Name: "a.stripe", Limits: perHour(100)})

	b.Send(2, &fibp.Consume{Queue: "b.q", Credit: 10, Throttles: []fibp.ThrottleDeclaration{{Name: "a.stripe", Limits: perHour(1)}}})
	_, f := b.Next()
	if e := expectError(t, f, fibp.CodeForbidden); !strings.Contains(e.Message, `throttle "a.stripe"`) {
		t.Fatalf("the refusal does not name the throttle: %q", e.Message)
	}
	b.Send(3, &fibp.Consume{Queue: "b.q", Credit: 10, Throttles: []fibp.ThrottleDeclaration{
		{Name: "b.own", Limits: perHour(5)}, {Name: "a.later", Limits: perHour(5), Key: merchantKey}}})
	_, f = b.Next()
	expectError(t, f, fibp.CodeForbidden)

	// Nothing of b's reached the throttles: a's keeps its own limit, and a takes the name b tried.
	st := a.Call(4, &fibp.GetThrottleStats{Name: "a.stripe"}).(*fibp.GetThrottleStatsResult)
	if st.ErrorCode != fibp.CodeOk || len(st.Summary.Limits) != 1 || st.Summary.Limits[0].MaxDeliveries != 100 || st.Summary.DeclaringSubscribers != 1 {
		t.Fatalf("tenant a's throttle after tenant b's attempts: %+v", st)
	}
	consumeWith(t, a, 5, "a.q", fibp.ThrottleDeclaration{Name: "a.later", Limits: perHour(5)})
	if r := admin.Call(6, &fibp.GetThrottleStats{Name: "b.own"}).(*fibp.GetThrottleStatsResult); r.ErrorCode != fibp.CodeThrottleNotFound {
		t.Fatalf("b's refused Consume left its first throttle declared: %v", r.ErrorCode)
	}

	// b declares its own; a Consume without throttles needs no throttle permission.
	consumeWith(t, b, 7, "b.q", fibp.ThrottleDeclaration{Name: "b.own", Limits: perHour(5)})
	consumeWith(t, b, 8, "b.q")
	// The superadmin may declare any throttle.
	newQueue(t, admin, &fibp.CreateQueue{Name: "ops"})
	consumeWith(t, admin, 9, "ops", fibp.ThrottleDeclaration{Name: "a.stripe", Limits: perHour(100)})
}

// Reading a throttle needs the same permission: a tenant reads its own throttles (before, only a
// superadmin could), never another's, and the queues the answer lists are those it may see.
func TestReadingAThrottleNeedsThePermissionOnItsName(t *testing.T) {
	_, admin, a, b := tenants(t)
	setACL(t, admin, keyOf(t, admin, "tenant-a"), "consume", "a.*", "throttle", "a.*", "throttle", "shared")
	setACL(t, admin, keyOf(t, admin, "tenant-b"), "consume", "b.*", "throttle", "b.*", "throttle", "shared")
	consumeWith(t, a, 1, "a.q", fibp.ThrottleDeclaration{Name: "a.t", Limits: perHour(5)})
	consumeWith(t, a, 2, "a.q", fibp.ThrottleDeclaration{Name: "shared", Limits: perHour(5)})
	consumeWith(t, b, 3, "b.q", fibp.ThrottleDeclaration{Name: "shared", Limits: perHour(5)})

	if r := a.Call(4, &fibp.GetThrottleStats{Name: "a.t"}).(*fibp.GetThrottleStatsResult); r.ErrorCode != fibp.CodeOk || r.Summary.Name != "a.t" {
		t.Fatalf("tenant a reading its throttle: %+v", r)
	}
	if r := a.Call(5, &fibp.GetThrottleBucket{Name: "a.t", BucketKind: fibp.BucketKindKeyed, Values: []string{}}).(*fibp.GetThrottleBucketResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("tenant a reading its throttle's bucket: %v", r.ErrorCode)
	}
	expectError(t, b.Call(6, &fibp.GetThrottleStats{Name: "a.t"}), fibp.CodeForbidden)
	expectError(t, b.Call(7, &fibp.GetThrottleBucket{Name: "a.t", BucketKind: fibp.BucketKindKeyed, Values: []string{}}), fibp.CodeForbidden)

	queues := func(c *rawClient, id uint32) []string {
		r := c.Call(id, &fibp.GetThrottleStats{Name: "shared"}).(*fibp.GetThrottleStatsResult)
		if r.ErrorCode != fibp.CodeOk || r.Summary.DeclaringSubscribers != 2 {
			t.Fatalf("reading the shared throttle: %+v", r)
		}
		var qs []string
		for _, q := range r.Queues {
			qs = append(qs, q.Queue)
		}
		return qs
	}
	if got := queues(a, 8); !slices.Equal(got, []string{"a.q"}) {
		t.Fatalf("tenant a sees the shared throttle active on %v, want only its own queue", got)
	}
	if got := queues(admin, 9); !slices.Equal(got, []string{"a.q", "b.q"}) {
		t.Fatalf("the superadmin sees the shared throttle active on %v", got)
	}
}

// The throttle kind round-trips through SetAcl and GetAcl; an unknown kind is still refused.
func TestThrottleIsAnACLKind(t *testing.T) {
	srv := startAuthServer(t, Options{})
	admin := srv.dial(bootKey)
	k := createKey(t, admin, "k", 0, "throttle", "tenant-a.*", "consume", "tenant-a.*")
	r := admin.Call(1, &fibp.GetACL{KeyID: k.KeyID}).(*fibp.GetACLResult)
	want := []fibp.ACLPermission{{Kind: "throttle", Pattern: "tenant-a.*"}, {Kind: "consume", Pattern: "tenant-a.*"}}
	if r.ErrorCode != fibp.CodeOk || !slices.Equal(r.Permissions, want) {
		t.Fatalf("GetAcl: %+v, want %v", r, want)
	}
	if e := expectError(t, admin.Call(2, &fibp.SetACL{KeyID: k.KeyID, Permissions: []fibp.ACLPermission{{Kind: "throttles", Pattern: "*"}}}),
		fibp.CodeInvalidConfigValue); !strings.Contains(e.Message, `"throttles"`) {
		t.Fatalf("SetAcl with an unknown kind: %q", e.Message)
	}
	// A throttle permission shows no queue of a matching name.
	newQueue(t, admin, &fibp.CreateQueue{Name: "tenant-b.q"})
	setACL(t, admin, k.KeyID, "throttle", "tenant-b.*")
	c := srv.dial(k.Key)
	if l := c.Call(3, &fibp.ListQueues{}).(*fibp.ListQueuesResult); len(l.Queues) != 0 {
		t.Fatalf("a key with only a throttle permission lists %+v", l.Queues)
	}
}

// keyOf finds the ID of the key named name.
func keyOf(t *testing.T, admin *rawClient, name string) string {
	t.Helper()
	l := admin.Call(102, &fibp.ListAPIKeys{}).(*fibp.ListAPIKeysResult)
	for _, k := range l.Keys {
		if k.Name == name {
			return k.KeyID
		}
	}
	t.Fatalf("no key named %q", name)
	return ""
}

// One tenant's throttle keyed per message fills the bucket memory with distinct keys; another
// tenant's throttled subscription still delivers, from its fair share. Before, the second
// throttle's first bucket waited for the first tenant's keys to leave their hour.
func TestOneTenantsKeysDoNotStarveAnothersThrottle(t *testing.T) {
	bo := broker.DefaultOptions(t.TempDir())
	bo.Sync, bo.BootstrapAPIKey, bo.ThrottleMemory = false, bootKey, 128<<10
	_, _, addr, stop := serveAt(t, bo, Options{})
	t.Cleanup(stop)
	dial := func(key string) *rawClient {
		c := dialRaw(t, addr)
		if f, ok := c.HandshakeKey(key).(*fibp.HandshakeOk); !ok {
			t.Fatalf("handshake answered %#v", f)
		}
		return c
	}
	admin := dial(bootKey)
	newQueue(t, admin, &fibp.CreateQueue{Name: "a.q"})
	newQueue(t, admin, &fibp.CreateQueue{Name: "b.q"})
	a := dial(createKey(t, admin, "tenant-a", 0, "consume", "a.*", "throttle", "a.*").Key)
	b := dial(createKey(t, admin, "tenant-b", 0, "consume", "b.*", "throttle", "b.*").Key)

	a.Send(1, &fibp.Consume{Queue: "a.q", Throttles: []fibp.ThrottleDeclaration{{Name: "a.t", Limits: perHour(1), Key: merchantKey}}})
	if _, f := a.Next(); f.Opcode() != fibp.OpConsumeOk {
		t.Fatalf("Consume answered %#v", f)
	}
	const sent = 2000 // far more keys than 128 KiB of buckets hold
	for batch := range sent / 500 {
		var ms []fibp.EnqueueMessage
		for i := range 500 {
			ms = append(ms, merchantMsg("a.q", fmt.Sprintf("m%05d", batch*500+i)))
		}
		enqueue(t, admin, ms...)
	}
	// At the bound: every message is delivered or held by the throttle, and some are held.
	var delivered uint64
	waitFor(t, func() bool {
		s := stats(t, admin, "a.q")
		delivered = s.InFlight
		return s.InFlight+s.Throttled == sent && s.Throttled > 0
	})

	consumeWith(t, b, 2, "b.q", fibp.ThrottleDeclaration{Name: "b.t", Limits: perHour(10)})
	enqueue(t, admin, merchantMsg("b.q", ""), merchantMsg("b.q", ""), merchantMsg("b.q", ""))
	waitFor(t, func() bool { return stats(t, admin, "b.q").InFlight == 3 })
	if got := b.Deliveries(3); len(got) != 3 {
		t.Fatalf("tenant b received %d messages", len(got))
	}
	t.Logf("tenant a's throttle took %d buckets of 128 KiB before tenant b came", delivered)
}

// A clean restart keeps the buckets: the server saves them when it stops and the next one goes on
// counting where it stopped, so the hour's one delivery of merchant a is not made twice while
// merchant b, never delivered, goes at once. Before, the restarted server had forgotten a's
// delivery and made it again.
func TestThrottleCountsSurviveACleanRestart(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q", VisibilityTimeoutMs: 600_000})
	hourly := fibp.ThrottleDeclaration{Name: "hourly", Limits: perHour(1), Key: merchantKey}
	enqueue(t, c, merchantMsg("q", "a"))
	consumeWith(t, c, 1, "q", hourly)
	first := c.Deliveries(1)[0]
	stop()

	addr, stop = startAt(t, dir)
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	enqueue(t, c, merchantMsg("q", "a"), merchantMsg("q", "b"))
	consumeWith(t, c, 2, "q", hourly)
	if d := c.Deliveries(1)[0]; string(d.Payload) != "b" {
		t.Fatalf("after the restart %q was delivered, want merchant b's message", d.Payload)
	}
	waitFor(t, func() bool { return stats(t, c, "q").Throttled == 1 })
	b := c.Call(3, &fibp.GetThrottleBucket{Name: "hourly", BucketKind: fibp.BucketKindKeyed, Values: []string{"a"}}).(*fibp.GetThrottleBucketResult)
	if b.ErrorCode != fibp.CodeOk || b.Bucket.NextRoomAt != first.LeasedAt+hourMs || !slices.Equal(b.Bucket.Counted, []uint64{1}) {
		t.Fatalf("after the restart merchant a's bucket: %+v (%v); its delivery at %d counts until %d",
			b.Bucket, b.ErrorCode, first.LeasedAt, first.LeasedAt+hourMs)
	}
}
