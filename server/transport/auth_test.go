package transport

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

const bootKey = "bootstrap-secret-of-at-least-32-characters"

// fakeClock is a settable clock shared by the broker and the transport.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// authServer is a server with authentication on, on a data directory that survives restart.
type authServer struct {
	t          *testing.T
	dir        string
	clock      *fakeClock
	opts       Options
	b          *broker.Broker
	s          *Server
	addr       string
	stopServer func()
}

func startAuthServer(t *testing.T, opts Options) *authServer {
	a := &authServer{t: t, dir: t.TempDir(), clock: newFakeClock(), opts: opts}
	a.start()
	t.Cleanup(a.stop)
	return a
}

func (a *authServer) start() {
	a.t.Helper()
	bo := broker.DefaultOptions(a.dir)
	bo.Sync, bo.Clock, bo.BootstrapAPIKey = false, a.clock.Now, bootKey
	b, err := broker.Open(bo)
	if err != nil {
		a.t.Fatal(err)
	}
	opts := a.opts
	opts.Clock = a.clock.Now
	a.b = b
	a.s, a.addr, a.stopServer = listen(a.t, b, opts)
}

func (a *authServer) stop() {
	if a.b == nil {
		return
	}
	a.stopServer()
	a.b.Close()
	a.b = nil
}

// dial connects and presents key, which must be accepted.
func (a *authServer) dial(key string) *rawClient {
	a.t.Helper()
	c := dialRaw(a.t, a.addr)
	if f, ok := c.HandshakeKey(key).(*fibp.HandshakeOk); !ok {
		a.t.Fatalf("handshake with a good key answered %#v", f)
	}
	return c
}

// refused checks that presenting key is answered Unauthorized and the connection closes.
func (a *authServer) refused(key string) {
	a.t.Helper()
	c := dialRaw(a.t, a.addr)
	expectError(a.t, c.HandshakeKey(key), fibp.CodeUnauthorized)
	if !c.Closed() {
		a.t.Fatal("the connection stayed open after Unauthorized")
	}
}

// createKey makes a key with acl (kind, pattern pairs) through the superadmin connection.
func createKey(t *testing.T, admin *rawClient, name string, expiresAt uint64, acl ...string) *fibp.CreateAPIKeyResult {
	t.Helper()
	k, ok := admin.Call(100, &fibp.CreateAPIKey{Name: name, ExpiresAtMs: expiresAt}).(*fibp.CreateAPIKeyResult)
	if !ok || k.ErrorCode != fibp.CodeOk || k.KeyID == "" || len(k.Key) < 43 {
		t.Fatalf("CreateApiKey: %#v", k)
	}
	setACL(t, admin, k.KeyID, acl...)
	return k
}

func setACL(t *testing.T, admin *rawClient, id string, acl ...string) {
	t.Helper()
	req := &fibp.SetACL{KeyID: id}
	for i := 0; i+1 < len(acl); i += 2 {
		req.Permissions = append(req.Permissions, fibp.ACLPermission{Kind: acl[i], Pattern: acl[i+1]})
	}
	if r := admin.Call(101, req).(*fibp.SetACLResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("SetAcl: %v", r.ErrorCode)
	}
}

func enqueueCodes(t *testing.T, c *rawClient, id uint32, queues ...string) []fibp.ErrorCode {
	t.Helper()
	res, ok := c.Call(id, enqueueOf(queues...)).(*fibp.EnqueueResult)
	if !ok || len(res.Results) != len(queues) {
		t.Fatalf("Enqueue answered %#v", res)
	}
	codes := make([]fibp.ErrorCode, len(queues))
	for i, r := range res.Results {
		codes[i] = r.ErrorCode
	}
	return codes
}

// enqueueOf is an Enqueue of one message to each of queues, its name as the payload.
func enqueueOf(queues ...string) *fibp.Enqueue {
	req := &fibp.Enqueue{}
	for _, q := range queues {
		req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: q, Payload: []byte(q)})
	}
	return req
}

func sameCodes(t *testing.T, what string, got []fibp.ErrorCode, want ...fibp.ErrorCode) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

func TestHandshakeNeedsAKey(t *testing.T) {
	a := startAuthServer(t, Options{})
	a.refused("")
	a.refused("not-a-key")
	a.refused(bootKey + "x")
	admin := a.dial(bootKey)
	if r := admin.Call(1, &fibp.ListAPIKeys{}).(*fibp.ListAPIKeysResult); r.ErrorCode != fibp.CodeOk || len(r.Keys) != 0 {
		t.Fatalf("ListApiKeys: %+v", r)
	}
}

func TestACLOnEveryPath(t *testing.T) {
	a := startAuthServer(t, Options{})
	admin := a.dial(bootKey)
	for _, q := range []string{"orders", "jobs.a", "other"} {
		newQueue(t, admin, &fibp.CreateQueue{Name: q})
	}
	k := createKey(t, admin, "worker", 0, "produce", "orders", "consume", "orders", "consume", "jobs.*", "admin", "jobs.*")
	w := a.dial(k.Key)

	// Hot path: Forbidden per item, the others go through, in order.
	sameCodes(t, "enqueue", enqueueCodes(t, w, 1, "orders", "orders.dlq", "other", "orders", "jobs.a"),
		fibp.CodeOk, fibp.CodeForbidden, fibp.CodeForbidden, fibp.CodeOk, fibp.CodeForbidden)
	// Every item denied: one Forbidden Error frame naming the key, the permission and the queues.
	e := expectError(t, w.Call(2, enqueueOf("other", "ordersx", "other")), fibp.CodeForbidden)
	if want := `API key ` + k.KeyID + ` has no produce permission on queues "other", "ordersx"`; e.Message != want {
		t.Fatalf("enqueue, all denied: %q, want %q", e.Message, want)
	}

	// Consume: an Error frame; Ack, Nack, ExtendLease: per item.
	expectError(t, w.Call(3, &fibp.Consume{Queue: "other", Credit: 1}), fibp.CodeForbidden)
	expectError(t, w.Call(4, &fibp.Consume{Queue: "orders.dlq", Credit: 1}), fibp.CodeForbidden)
	w.Subscribe(5, "orders", 2)
	ds := w.Deliveries(2)
	ack := w.Call(6, &fibp.Ack{Items: []fibp.AckItem{{Queue: "other", MessageID: ds[0].MessageID}, {Queue: "orders", MessageID: ds[0].MessageID}}}).(*fibp.AckResult)
	if len(ack.Results) != 2 || ack.Results[0].ErrorCode != fibp.CodeForbidden || ack.Results[1].ErrorCode != fibp.CodeOk {
		t.Fatalf("Ack: %+v", ack.Results)
	}
	ext := w.Call(7, &fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "orders", MessageID: ds[1].MessageID, ExtendByMs: 1000}, {Queue: "other", MessageID: ds[1].MessageID, ExtendByMs: 1000}}}).(*fibp.ExtendLeaseResult)
	if len(ext.Results) != 2 || ext.Results[0].ErrorCode != fibp.CodeOk || ext.Results[1].ErrorCode != fibp.CodeForbidden {
		t.Fatalf("ExtendLease: %+v", ext.Results)
	}
	nack := w.Call(8, &fibp.Nack{Items: []fibp.NackItem{{Queue: "orders.dlq", MessageID: ds[1].MessageID}}}).(*fibp.NackResult)
	if len(nack.Results) != 1 || nack.Results[0].ErrorCode != fibp.CodeForbidden {
		t.Fatalf("Nack: %+v", nack.Results)
	}

	// Admin on matching queues only; superadmin for keys, config and cluster.
	if r := w.Call(9, &fibp.GetStats{Queue: "jobs.a"}).(*fibp.GetStatsResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("GetStats jobs.a: %v", r.ErrorCode)
	}
	for i, req := range []fibp.Frame{
		&fibp.GetStats{Queue: "orders"}, &fibp.CreateQueue{Name: "orders2"}, &fibp.DeleteQueue{Queue: "other"},
		&fibp.UpdateQueue{Queue: "orders"}, &fibp.Redrive{DLQQueue: "orders.dlq"}, &fibp.GetStats{Queue: "jobs"},
		&fibp.CreateAPIKey{Name: "mine"}, &fibp.ListAPIKeys{}, &fibp.RevokeAPIKey{KeyID: k.KeyID},
		&fibp.SetACL{KeyID: k.KeyID}, &fibp.GetACL{KeyID: k.KeyID}, &fibp.SetConfig{Key: "a", Value: "b"},
		&fibp.GetConfig{Key: "a"}, &fibp.ListConfig{}, &fibp.GetClusterStatus{}, &fibp.SetRebalancing{},
		&fibp.DrainNode{}, &fibp.MoveQueueLeader{Queue: "jobs.a"}, &fibp.GetThrottleStats{Name: "t"},
	} {
		expectError(t, w.Call(uint32(20+i), req), fibp.CodeForbidden)
	}
	if r := w.Call(50, &fibp.CreateQueue{Name: "jobs.b"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue jobs.b: %v", r.ErrorCode)
	}

	// ListQueues and GetRoutes show only queues the key has some permission on.
	lq := w.Call(51, &fibp.ListQueues{}).(*fibp.ListQueuesResult)
	var names []string
	for _, q := range lq.Queues {
		names = append(names, q.Name)
	}
	if want := "[jobs.a jobs.a.dlq jobs.b jobs.b.dlq orders]"; fmt.Sprint(names) != want { // jobs.* matches jobs.a.dlq
		t.Fatalf("ListQueues as the worker: %v", names)
	}
	if all := admin.Call(52, &fibp.ListQueues{}).(*fibp.ListQueuesResult); len(all.Queues) != 8 {
		t.Fatalf("ListQueues as superadmin: %d queues", len(all.Queues))
	}
	routes := w.Call(53, &fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: "orders"}, {Queue: "other"}}}).(*fibp.GetRoutesResult)
	if len(routes.Entries) != 1 || routes.Entries[0].Queue != "orders" {
		t.Fatalf("GetRoutes as the worker: %+v", routes.Entries)
	}

	// GetAcl shows what SetAcl set.
	acl := admin.Call(54, &fibp.GetACL{KeyID: k.KeyID}).(*fibp.GetACLResult)
	if acl.ErrorCode != fibp.CodeOk || len(acl.Permissions) != 4 || acl.Permissions[2] != (fibp.ACLPermission{Kind: "consume", Pattern: "jobs.*"}) || acl.IsSuperadmin {
		t.Fatalf("GetAcl: %+v", acl)
	}
}

// ACL changes, revocation and expiry reach a connection that is already open, at its next
// request.
func TestKeyChangesOnOpenConnections(t *testing.T) {
	a := startAuthServer(t, Options{})
	admin := a.dial(bootKey)
	newQueue(t, admin, &fibp.CreateQueue{Name: "orders"})
	k := createKey(t, admin, "worker", 0, "produce", "orders")
	w := a.dial(k.Key)
	sameCodes(t, "before", enqueueCodes(t, w, 1, "orders"), fibp.CodeOk)

	setACL(t, admin, k.KeyID, "consume", "orders")
	expectError(t, w.Call(2, enqueueOf("orders")), fibp.CodeForbidden)
	setACL(t, admin, k.KeyID, "produce", "*")
	sameCodes(t, "after SetAcl *", enqueueCodes(t, w, 3, "orders"), fibp.CodeOk)

	if r := admin.Call(4, &fibp.RevokeAPIKey{KeyID: k.KeyID}).(*fibp.RevokeAPIKeyResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("RevokeApiKey: %v", r.ErrorCode)
	}
	expectError(t, w.Call(5, &fibp.Ping{}), fibp.CodeUnauthorized)
	if !w.Closed() {
		t.Fatal("a revoked key's connection stayed open")
	}
	a.refused(k.Key)
	if r := admin.Call(6, &fibp.RevokeAPIKey{KeyID: k.KeyID}).(*fibp.RevokeAPIKeyResult); r.ErrorCode != fibp.CodeAPIKeyNotFound {
		t.Fatalf("revoking twice: %v", r.ErrorCode)
	}

	expiring := createKey(t, admin, "temp", uint64(a.clock.Now().Add(time.Hour).UnixMilli()), "produce", "orders")
	e := a.dial(expiring.Key)
	sameCodes(t, "before expiry", enqueueCodes(t, e, 7, "orders"), fibp.CodeOk)
	a.clock.Advance(time.Hour)
	expectError(t, e.Call(8, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "orders"}}}), fibp.CodeUnauthorized)
	if !e.Closed() {
		t.Fatal("an expired key's connection stayed open")
	}
	a.refused(expiring.Key)
	list := admin.Call(9, &fibp.ListAPIKeys{}).(*fibp.ListAPIKeysResult)
	if len(list.Keys) != 1 || list.Keys[0].KeyID != expiring.KeyID || list.Keys[0].Name != "temp" || list.Keys[0].ExpiresAtMs == 0 {
		t.Fatalf("ListApiKeys: %+v", list.Keys)
	}
}

// Keys and ACLs are meta state: they survive a restart; the bootstrap key cannot be revoked.
func TestKeysSurviveRestart(t *testing.T) {
	a := startAuthServer(t, Options{})
	admin := a.dial(bootKey)
	newQueue(t, admin, &fibp.CreateQueue{Name: "orders"})
	k := createKey(t, admin, "worker", 0, "produce", "orders")
	gone := createKey(t, admin, "gone", 0)
	admin.Call(1, &fibp.RevokeAPIKey{KeyID: gone.KeyID})
	if e := expectError(t, admin.Call(2, &fibp.RevokeAPIKey{KeyID: "bootstrap"}), fibp.CodeInvalidConfigValue); !strings.Contains(e.Message, "comes from the server's configuration") {
		t.Fatalf("revoking the bootstrap key: %q", e.Message)
	}
	a.stop()
	a.start()
	w := a.dial(k.Key)
	sameCodes(t, "after restart", enqueueCodes(t, w, 3, "orders", "orders.dlq"), fibp.CodeOk, fibp.CodeForbidden)
	a.refused(gone.Key)
}

func TestPerClientConnectionLimit(t *testing.T) {
	a := startAuthServer(t, Options{MaxPerClient: 2})
	a.dial(bootKey)
	second := a.dial(bootKey)
	third := dialRaw(t, a.addr)
	if !third.Closed() {
		t.Fatal("a third connection from one address was accepted")
	}
	second.NC.Close()
	for i := 0; ; i++ { // the server notices the close in its own time
		c := dialRaw(t, a.addr)
		hs := &fibp.Handshake{ProtocolVersion: 1, APIKey: wire.Some(bootKey)}
		c.Send(0, hs)
		if _, err := c.FR.Next(); err == nil {
			break
		}
		if i == 1000 {
			t.Fatal("a slot freed by a closed connection is never reused")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHandshakeDeadline(t *testing.T) {
	a := startAuthServer(t, Options{HandshakeTimeout: 50 * time.Millisecond})
	c := dialRaw(t, a.addr)
	if !c.Closed() {
		t.Fatal("a connection that never sends its Handshake stays open")
	}
}
