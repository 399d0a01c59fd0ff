package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/service"
)

// queuePage and keyPage are the queue list's and the key table's answers.
type queuePage struct {
	Queues []service.QueueRow
	Next   *string
	Total  int
}

type keyPage struct {
	Keys  []service.KeyRow
	Next  *string
	Total int
}

// The queue list (paged, searched, sorted, only the queues a key may see), one queue with its
// definition, its fairness keys, and explain for a message and a key, through HTTP against a
// real server; ACL denials and bad input refused.
func TestAdminAPIQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	p := startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	base, root := "http://"+p.addrs.HTTP+apiPath, withBearer(testBootstrapKey)
	admin := handshake(t, p.addrs.FIBP, testBootstrapKey)
	const n = 12
	for i := range n {
		if r := admin.Call(uint32(1+i), &fibp.CreateQueue{Name: fmt.Sprintf("q%02d", i), VisibilityTimeoutMs: 60_000}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatal(r.ErrorCode)
		}
	}
	// q03 holds the most messages, over three fairness keys; one of them is delayed an hour.
	enq := &fibp.Enqueue{}
	for i := range 9 {
		enq.Messages = append(enq.Messages, fibp.EnqueueMessage{Queue: "q03", Payload: []byte("m"), FairnessKey: wire.Some(fmt.Sprint("tenant-", i%3))})
	}
	enq.Messages = append(enq.Messages, fibp.EnqueueMessage{Queue: "q05", Payload: []byte("m")},
		fibp.EnqueueMessage{Queue: "q03", Payload: []byte("later"), FairnessKey: wire.Some("tenant-9"), DelayMs: wire.Some[uint64](3_600_000)})
	res := admin.Call(50, enq).(*fibp.EnqueueResult)
	delayed := res.Results[len(res.Results)-1].MessageID.String()

	// Paging by name: every queue once, dead-letter queues not listed.
	var seen []string
	var page queuePage
	for after := ""; ; {
		apiOKBody(t, "GET", base+"queues?limit=5"+after, "", root, &page)
		if page.Total != n || len(page.Queues) > 5 {
			t.Fatalf("a page of the queue list: %+v", page)
		}
		for _, q := range page.Queues {
			seen = append(seen, q.Name)
		}
		if page.Next == nil {
			break
		}
		after = "&after=" + *page.Next
	}
	if len(seen) != n || seen[0] != "q00" || seen[n-1] != "q11" {
		t.Fatalf("paging through the queue list saw %v", seen)
	}
	apiOKBody(t, "GET", base+"queues?sort=depth&limit=2", "", root, &page)
	if len(page.Queues) != 2 || page.Queues[0].Name != "q03" || page.Queues[0].Depth != 10 || page.Queues[0].Delayed != 1 ||
		page.Queues[0].FairnessKeys < 3 || page.Queues[1].Name != "q05" || page.Next == nil || *page.Next != "q05" {
		t.Fatalf("the two deepest queues: %+v", page)
	}
	apiOKBody(t, "GET", base+"queues?search=q1", "", root, &page)
	if page.Total != 2 || len(page.Queues) != 2 || page.Queues[0].Name != "q10" {
		t.Fatalf("search=q1: %+v", page)
	}

	// A key on q0* sees ten queues; it may read q03 but not q11.
	reader := newKey(t, admin, 60, "consume", "q0*")
	apiOKBody(t, "GET", base+"queues?limit=500", "", withBearer(reader), &page)
	if page.Total != 10 || len(page.Queues) != 10 || page.Queues[9].Name != "q09" {
		t.Fatalf("the queue list of a q0* key: %+v", page)
	}

	// One queue, with its definition.
	var one struct {
		service.QueueRow
		Definition map[string]string
	}
	apiOKBody(t, "GET", base+"queues/q03", "", withBearer(reader), &one)
	if one.Name != "q03" || one.Depth != 10 || one.Definition["visibility_timeout_ms"] != "60000" || one.Definition["ordering"] == "" {
		t.Fatalf("queue q03: %+v", one)
	}

	// Its keys: three with a ready backlog, a fourth with the delayed message; paged by name.
	var keys keyPage
	apiOKBody(t, "GET", base+"queues/q03/keys?sort=name&limit=2", "", withBearer(reader), &keys)
	if keys.Total < 3 || len(keys.Keys) != 2 || keys.Keys[0].Key != "tenant-0" || keys.Keys[0].Backlog != 3 || keys.Next == nil {
		t.Fatalf("q03's keys: %+v", keys)
	}
	apiOKBody(t, "GET", base+"queues/q03/keys?sort=name&limit=2&after="+*keys.Next, "", withBearer(reader), &keys)
	if len(keys.Keys) == 0 || keys.Keys[0].Key != "tenant-2" {
		t.Fatalf("q03's keys, second page: %+v", keys)
	}

	// Explain: the delayed message waits for its time, with the figure; a key's backlog.
	var ex service.Explanation
	apiOKBody(t, "GET", base+"queues/q03/messages/"+delayed+"/explain", "", withBearer(reader), &ex)
	if ex.ID != delayed || ex.State != "delayed" || ex.DeliverableNow || len(ex.Reasons) == 0 || ex.Reasons[0].Reason != "delayed" ||
		ex.Reasons[0].Until < ex.EnqueuedAt+3_599_000 || ex.Reasons[0].Text == "" {
		t.Fatalf("explain of the delayed message: %+v", ex)
	}
	var kx service.KeyExplanation
	apiOKBody(t, "GET", base+"queues/q03/keys/tenant-1/explain", "", withBearer(reader), &kx)
	if kx.Key != "tenant-1" || kx.Backlog != 3 || len(kx.Reasons) == 0 {
		t.Fatalf("explain of key tenant-1: %+v", kx)
	}

	for _, tc := range []struct {
		name, path string
		edit       func(*http.Request)
		status     int
		code       string
	}{
		{"limit 501", "queues?limit=501", root, 400, "bad_request"},
		{"limit 0", "queues?limit=0", root, 400, "bad_request"},
		{"limit of text", "queues?limit=all", root, 400, "bad_request"},
		{"a bad sort", "queues?sort=size", root, 400, "bad_request"},
		{"an unknown queue", "queues/nope", root, 404, "QueueNotFound"},
		{"the keys of an unknown queue", "queues/nope/keys", root, 404, "QueueNotFound"},
		{"keys limit 1001", "queues/q03/keys?limit=1001", root, 400, "bad_request"},
		{"keys sorted badly", "queues/q03/keys?sort=weight", root, 400, "bad_request"},
		{"explain of a malformed ID", "queues/q03/messages/12/explain", root, 400, "bad_request"},
		{"explain of an unknown message", "queues/q03/messages/" + wire.UUID{}.String() + "/explain", root, 404, "MessageNotFound"},
		{"explain in an unknown queue", "queues/nope/messages/" + delayed + "/explain", root, 404, "QueueNotFound"},
		{"a queue outside the ACL", "queues/q11", withBearer(reader), 403, "forbidden"},
		{"keys outside the ACL", "queues/q11/keys", withBearer(reader), 403, "forbidden"},
		{"explain outside the ACL", "queues/q11/keys/k/explain", withBearer(reader), 403, "forbidden"},
		{"no key", "queues", nil, 401, "unauthorized"},
	} {
		res, body := send(t, "GET", base+tc.path, "", tc.edit)
		if _, code := errorBody(t, body); res.StatusCode != tc.status || code != tc.code {
			t.Errorf("%s: GET %s answered %d %s, want %d with code %s", tc.name, tc.path, res.StatusCode, body, tc.status, tc.code)
		}
	}
	if res, body := send(t, "GET", base+"queues/q03/keys/"+strings.Repeat("k", 300)+"/explain", "", root); res.StatusCode != 200 ||
		!strings.Contains(body, "no_backlog") {
		t.Errorf("explain of a key without messages answered %d %s", res.StatusCode, body)
	}
}
