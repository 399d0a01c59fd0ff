package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Keys, overview, cluster, throttles, the dead-letter queue and redrive through HTTP against a
// real server with authentication on: each answers what FIBP would, a key sees only what its
// ACL allows, and bad input is refused with a 4xx and a code.
func TestAdminAPIEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	p := startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	base, root := "http://"+p.addrs.HTTP+apiPath, withBearer(testBootstrapKey)
	admin := handshake(t, p.addrs.FIBP, testBootstrapKey)
	for i, q := range []string{"orders", "payments", "<img-src=x-onerror=alert(1)>", "team/a"} {
		if r := admin.Call(uint32(1+i), &fibp.CreateQueue{Name: q, MaxAttempts: 1, VisibilityTimeoutMs: 60_000}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
	}
	enq := &fibp.Enqueue{}
	for i := range 6 {
		enq.Messages = append(enq.Messages, fibp.EnqueueMessage{Queue: "orders", Payload: []byte(fmt.Sprint("order ", i)),
			Headers: map[string]string{"merchant": fmt.Sprint("m", i%3)}})
	}
	enq.Messages = append(enq.Messages, fibp.EnqueueMessage{Queue: "payments", Payload: []byte("p")})
	for _, r := range admin.Call(10, enq).(*fibp.EnqueueResult).Results {
		if r.ErrorCode != fibp.CodeOk {
			t.Fatal(r.ErrorCode)
		}
	}

	// Keys: one that consumes orders* and reads throttle api, one that only produces payments.
	var reader, producer struct{ ID, Secret string }
	apiOKBody(t, "POST", base+"keys", `{"name": "reader", "expires_at": "2999-01-01T00:00:00Z"}`, root, &reader)
	apiOKBody(t, "POST", base+"keys", `{"name": "<b>producer</b>", "expires_at": 32503680000000}`, root, &producer)
	var k keyJSON
	apiOKBody(t, "PUT", base+"keys/"+reader.ID+"/acl", `{"acl": [{"kind": "consume", "pattern": "orders*"}, {"kind": "throttle", "pattern": "api"}]}`, root, &k)
	if k.ID != reader.ID || len(k.ACL) != 2 || k.ACL[0] != (permJSON{"consume", "orders*"}) || k.ExpiresAt == nil || k.ExpiresAt.Year() != 2999 {
		t.Fatalf("SetACL answered %+v", k)
	}
	apiOKBody(t, "PUT", base+"keys/"+producer.ID+"/acl", `{"acl": [{"kind": "produce", "pattern": "payments"}]}`, root, nil)
	var keys struct{ Keys []keyJSON }
	res, body := send(t, "GET", base+"keys", "", root)
	if res.StatusCode != 200 || !strings.Contains(body, `\u003cb\u003eproducer\u003c/b\u003e`) || strings.Contains(body, "<b>") {
		t.Fatalf("GET keys answered %d %s: want the name's markup escaped", res.StatusCode, body)
	}
	apiOKBody(t, "GET", base+"keys", "", root, &keys)
	if len(keys.Keys) != 2 || keys.Keys[0].CreatedAt.IsZero() {
		t.Fatalf("GET keys: %+v", keys)
	}
	for _, path := range []string{"keys", "cluster"} {
		res, body := send(t, "GET", base+path, "", withBearer(reader.Secret))
		if _, code := errorBody(t, body); res.StatusCode != 403 || code != "forbidden" || !strings.Contains(body, "superadmin") {
			t.Errorf("GET %s with a consume key answered %d %s", path, res.StatusCode, body)
		}
	}

	// Overview and cluster.
	var o overviewJSON
	apiOKBody(t, "GET", base+"overview", "", root, &o)
	if o.Queues != 4 || o.Messages != 7 || o.InFlight != 0 || !o.Authentication || o.Cluster || o.NodeID != "local" || o.Version == "" {
		t.Fatalf("overview: %+v", o)
	}
	apiOKBody(t, "GET", base+"overview", "", withBearer(reader.Secret), &o)
	if o.Queues != 1 || o.Messages != 6 {
		t.Fatalf("overview of the orders* key: %+v, want orders alone", o)
	}
	var c clusterJSON
	apiOKBody(t, "GET", base+"cluster", "", root, &c)
	if c.NodeID != "local" || c.MetaLeader != "local" || len(c.Nodes) != 1 || !c.Nodes[0].Self || c.Rebalancing != "enabled" || c.QueueLeaderships == 0 {
		t.Fatalf("cluster: %+v", c)
	}

	// A keyed throttle of one delivery a minute per merchant: three buckets, one message each
	// delivered, the other three waiting.
	consumer := handshake(t, p.addrs.FIBP, testBootstrapKey)
	throttle := fibp.ThrottleDeclaration{Name: "api", Limits: []fibp.ThrottleLimit{{MaxDeliveries: 1, WindowMs: 60_000}},
		Key: fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "merchant"}}}
	consumer.Send(20, &fibp.Consume{Queue: "orders", Credit: 100, Throttles: []fibp.ThrottleDeclaration{throttle}})
	if _, f := consumer.Next(); f.Opcode() != fibp.OpConsumeOk {
		t.Fatalf("Consume answered %#v", f)
	}
	ds := consumer.Deliveries(3)
	var ts struct{ Throttles []throttleJSON }
	apiOKBody(t, "GET", base+"throttles?top=2", "", withBearer(reader.Secret), &ts)
	if len(ts.Throttles) != 1 {
		t.Fatalf("throttles: %+v", ts)
	}
	if th := ts.Throttles[0]; th.Name != "api" || th.Key != "header:merchant" || len(th.Limits) != 1 || th.Limits[0] != (limitJSON{1, 60_000}) ||
		th.Waiting != 3 || th.ActiveBuckets != 3 || th.BucketsAtLimit != 3 || len(th.Buckets) != 2 || th.Subscribers != 1 ||
		len(th.Queues) != 1 || th.Queues[0] != "orders" {
		t.Fatalf("throttle api: %+v", th)
	}
	apiOKBody(t, "GET", base+"throttles", "", withBearer(producer.Secret), &ts)
	if len(ts.Throttles) != 0 {
		t.Fatalf("a key without the throttle permission sees %+v", ts)
	}
	var page struct {
		Buckets []bucketJSON
		Next    *string
		Total   int
	}
	var seen []string
	for after := ""; ; {
		apiOKBody(t, "GET", base+"throttles/api/buckets?limit=2"+after, "", withBearer(reader.Secret), &page)
		for _, b := range page.Buckets {
			if b.Waiting != 1 || len(b.Counted) != 1 || b.Counted[0] != 1 || b.NextRoomAt == 0 || len(b.Values) != 1 || b.Key != b.Values[0] {
				t.Fatalf("bucket %+v", b)
			}
			seen = append(seen, b.Key)
		}
		if page.Total != 3 || page.Next == nil {
			break
		}
		after = "&after=" + *page.Next
	}
	if strings.Join(seen, " ") != "m0 m1 m2" {
		t.Fatalf("paging through the buckets saw %v, want m0 m1 m2", seen)
	}

	// A dead letter: its error and why it died, then a redrive.
	nr := consumer.Call(21, &fibp.Nack{Items: []fibp.NackItem{{Queue: "orders", MessageID: ds[0].MessageID, Error: "card <declined>"}}}).(*fibp.NackResult)
	if nr.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatal(nr.Results[0].ErrorCode)
	}
	var dead pageJSON
	apiOKBody(t, "GET", base+"queues/orders.dlq/messages", "", withBearer(reader.Secret), &dead)
	if len(dead.Messages) != 1 || dead.Messages[0].Error != "card <declined>" || dead.Messages[0].DeadLetter == nil ||
		dead.Messages[0].DeadLetter.Queue != "orders" || dead.Messages[0].DeadLetter.Attempts != 1 ||
		dead.Messages[0].DeadLetter.Reason != "max_attempts" || dead.Messages[0].DeadLetter.At == nil {
		t.Fatalf("the dead letter reads %+v", dead.Messages)
	}
	res, body = send(t, "POST", base+"queues/orders/redrive", `{}`, withBearer(reader.Secret))
	if res.StatusCode != 403 || !strings.Contains(body, `\"orders.dlq\"`) {
		t.Fatalf("a redrive with a consume key answered %d %s", res.StatusCode, body)
	}
	var redriven struct {
		Queue    string
		Redriven uint64
	}
	apiOKBody(t, "POST", base+"queues/orders/redrive", `{"count": 5, "reclassify": "none"}`, root, &redriven)
	if redriven.Queue != "orders.dlq" || redriven.Redriven != 1 {
		t.Fatalf("redrive: %+v", redriven)
	}
	apiOKBody(t, "GET", base+"queues/orders.dlq/messages", "", root, &dead)
	if len(dead.Messages) != 0 {
		t.Fatalf("after the redrive the dead-letter queue holds %+v", dead.Messages)
	}

	// Bad input.
	for _, tc := range []struct {
		name, method, path, body string
		edit                     func(*http.Request)
		status                   int
		code                     string
	}{
		{"unknown queue's redrive", "POST", "queues/nope/redrive", `{}`, root, 404, "QueueNotFound"},
		{"redrive of a bad reclassify", "POST", "queues/orders/redrive", `{"reclassify": 7}`, root, 400, "bad_request"},
		{"redrive of an unknown field", "POST", "queues/orders/redrive", `{"cuont": 1}`, root, 400, "bad_request"},
		{"redrive of a negative count", "POST", "queues/orders/redrive", `{"count": -1}`, root, 400, "bad_request"},
		{"redrive of two values", "POST", "queues/orders/redrive", `{} {}`, root, 400, "bad_request"},
		{"redrive of broken JSON", "POST", "queues/orders/redrive", `{"count":`, root, 400, "bad_request"},
		{"redrive as a form", "POST", "queues/orders/redrive", `count=1`, with(root, withHeader("Content-Type", "application/x-www-form-urlencoded")), 415, "unsupported_media_type"},
		{"a body too large", "PUT", "keys/" + reader.ID + "/acl", `{"acl": [` + strings.Repeat(`{"kind": "admin", "pattern": "x"},`, 3000) + `{}]}`, root, 413, "too_large"},
		{"a bad kind", "PUT", "keys/" + reader.ID + "/acl", `{"acl": [{"kind": "root", "pattern": "x"}]}`, root, 400, "bad_request"},
		{"a bad pattern", "PUT", "keys/" + reader.ID + "/acl", `{"acl": [{"kind": "admin", "pattern": ""}]}`, root, 400, "InvalidConfigValue"},
		{"ACL of an unknown key", "PUT", "keys/key_nope/acl", `{"acl": []}`, root, 404, "APIKeyNotFound"},
		{"revoke of an unknown key", "POST", "keys/key_nope/revoke", `{}`, root, 404, "APIKeyNotFound"},
		{"a key without a name", "POST", "keys", `{}`, root, 400, "InvalidConfigValue"},
		{"a key expired", "POST", "keys", `{"name": "x", "expires_at": "2001-01-01T00:00:00Z"}`, root, 400, "InvalidConfigValue"},
		{"a key's expiry of text", "POST", "keys", `{"name": "x", "expires_at": "soon"}`, root, 400, "bad_request"},
		{"throttles top 0", "GET", "throttles?top=0", "", root, 400, "bad_request"},
		{"throttles top 101", "GET", "throttles?top=101", "", root, 400, "bad_request"},
		{"buckets limit 1001", "GET", "throttles/api/buckets?limit=1001", "", root, 400, "bad_request"},
		{"buckets of an unknown throttle", "GET", "throttles/nope/buckets", "", root, 404, "ThrottleNotFound"},
		{"buckets without the permission", "GET", "throttles/api/buckets", "", withBearer(producer.Secret), 403, "forbidden"},
		{"an unknown path", "GET", "nothing", "", root, 404, "not_found"},
		{"a GET of redrive", "GET", "queues/orders/redrive", "", root, 404, "not_found"},
		{"a malformed message ID", "GET", "queues/orders/messages/not-an-id", "", root, 400, "bad_request"},
		{"an unknown message", "GET", "queues/orders/messages/" + wire.UUID{}.String(), "", root, 404, "MessageNotFound"},
	} {
		res, body := send(t, tc.method, base+tc.path, tc.body, tc.edit)
		if _, code := errorBody(t, body); res.StatusCode != tc.status || code != tc.code {
			t.Errorf("%s: %s %s answered %d %s, want %d with code %s", tc.name, tc.method, tc.path, res.StatusCode, body, tc.status, tc.code)
		}
	}

	// A revoked key is refused at once; a queue named like markup is data.
	apiOKBody(t, "POST", base+"keys/"+producer.ID+"/revoke", `{}`, root, nil)
	if res, body := send(t, "GET", base+"overview", "", withBearer(producer.Secret)); res.StatusCode != 401 {
		t.Fatalf("a revoked key answered %d %s", res.StatusCode, body)
	}
	res, body = send(t, "GET", base+"queues/<img-src=x-onerror=alert(1)>/messages", "", root)
	if res.StatusCode != 200 || strings.ContainsAny(body, "<>") || !strings.Contains(body, `\u003cimg-src=x-onerror=alert(1)\u003e`) {
		t.Fatalf("the messages of a queue named like markup answered %d %s", res.StatusCode, body)
	}
	res, body = send(t, "GET", base+"queues/team%2Fa/messages", "", root)
	if res.StatusCode != 200 || !strings.Contains(body, `"queue":"team/a"`) {
		t.Fatalf("the messages of queue team/a (its slash escaped) answered %d %s", res.StatusCode, body)
	}
}
