package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/internal/fibptest"
)

// apiCall sends method url with key as the bearer (none when "") and returns the status and body.
func apiCall(t *testing.T, method, url, key string, edit func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if edit != nil {
		edit(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// apiOK is apiCall that must answer 200, decoded into v.
func apiOK(t *testing.T, method, url, key string, v any) {
	t.Helper()
	status, body := apiCall(t, method, url, key, nil)
	if status != http.StatusOK {
		t.Fatalf("%s %s answered %d %s", method, url, status, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s %s: %v in %s", method, url, err, body)
	}
}

// peekAll pages through queue with count per page and returns every message.
func peekAll(t *testing.T, base, key, queue string, count int) []messageJSON {
	t.Helper()
	var all []messageJSON
	after := ""
	for pages := 0; ; pages++ {
		var page pageJSON
		apiOK(t, http.MethodGet, fmt.Sprintf("%s%s%s/messages?count=%d&after=%s", base, queuesPath, queue, count, after), key, &page)
		if len(page.Messages) > count {
			t.Fatalf("a page of count=%d holds %d messages", count, len(page.Messages))
		}
		all = append(all, page.Messages...)
		if page.Next == "" {
			return all
		}
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		after = page.Next
	}
}

// Peeking shows every stored message with its body and state and changes none of them: the
// messages peeked are delivered afterwards at attempt 1 with the full lease. A message is read by
// ID, deleted, and a queue purged, leased messages included (their consumer's Ack is then
// MessageNotFound); after a restart the queue is as the deletions left it, the dead-letter queue
// as the Nack left it.
func TestPeekDeleteAndPurgeOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn"}
	env := serverEnv("FILA_BOOTSTRAP_API_KEY=" + testBootstrapKey)
	p := startServerEnv(t, bin, env, nil, args...)
	base, key := "http://"+p.addrs.HTTP, testBootstrapKey
	c := handshake(t, p.addrs.FIBP, key)
	const lease = 60_000
	if r := c.Call(1, &fibp.CreateQueue{Name: "orders", VisibilityTimeoutMs: lease, MaxAttempts: 1}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatal(r.ErrorCode)
	}
	const n = 25
	req := &fibp.Enqueue{}
	for i := range n {
		req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: "orders", Headers: map[string]string{"i": fmt.Sprint(i)},
			Payload: []byte(fmt.Sprintf("order %d", i)), FairnessKey: wire.Some("tenant-a")})
	}
	var ids []string
	for _, r := range c.Call(2, req).(*fibp.EnqueueResult).Results {
		if r.ErrorCode != fibp.CodeOk {
			t.Fatal(r.ErrorCode)
		}
		ids = append(ids, r.MessageID.String())
	}

	// Peeked three times over, in pages of 10, 7 and 1000: every message, oldest first, untouched.
	for _, count := range []int{10, 7, 1000} {
		got := peekAll(t, base, key, "orders", count)
		if len(got) != n {
			t.Fatalf("count=%d: peeked %d messages, want %d", count, len(got), n)
		}
		for i, m := range got {
			payload, _ := base64.StdEncoding.DecodeString(m.Payload)
			want := fmt.Sprintf("order %d", i)
			if m.ID != ids[i] || string(payload) != want || m.Preview != want || m.Headers["i"] != fmt.Sprint(i) ||
				m.State != "ready" || m.Attempts != 0 || m.Lease != nil || m.FairnessKey != "tenant-a" {
				t.Fatalf("count=%d: message %d peeked as %+v, want ID %s, payload %q, ready, attempt 0", count, i, m, ids[i], want)
			}
		}
	}
	var one messageJSON
	apiOK(t, http.MethodGet, base+queuesPath+"orders/messages/"+ids[4], key, &one)
	if one.ID != ids[4] || one.Preview != "order 4" {
		t.Fatalf("message %s read as %+v", ids[4], one)
	}

	// The first deliveries after all that peeking: attempt 1, a lease of the whole visibility timeout.
	c.Subscribe(3, "orders", 2)
	ds := c.Deliveries(2)
	for i, d := range ds {
		if d.MessageID.String() != ids[i] || d.AttemptCount != 1 || d.LeaseExpiresAt-d.LeasedAt != lease {
			t.Fatalf("delivery %d after peeks: %s attempt %d lease %d ms, want %s attempt 1 lease %d ms",
				i, d.MessageID, d.AttemptCount, d.LeaseExpiresAt-d.LeasedAt, ids[i], lease)
		}
	}
	page := peekAll(t, base, key, "orders", 3)
	if m := page[1]; m.State != "leased" || m.Attempts != 1 || m.Lease == nil || m.Lease.ExpiresAt.Sub(m.Lease.LeasedAt).Milliseconds() != lease {
		t.Fatalf("a leased message peeked as %+v", m)
	}

	// The first one dies (max_attempts 1) and shows in the dead-letter queue with its error.
	nr := c.Call(4, &fibp.Nack{Items: []fibp.NackItem{{Queue: "orders", MessageID: ds[0].MessageID, Error: "card declined"}}}).(*fibp.NackResult)
	if nr.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatal(nr.Results[0].ErrorCode)
	}
	dead := peekAll(t, base, key, "orders.dlq", 10)
	if len(dead) != 1 || dead[0].ID != ids[0] || dead[0].LastError != "card declined" || dead[0].Attempts != 1 || dead[0].Preview != "order 0" {
		t.Fatalf("the dead-letter queue peeked as %+v", dead)
	}

	// Delete one (then it is gone, and a second delete finds nothing); purge the rest.
	var deleted map[string]string
	apiOK(t, http.MethodDelete, base+queuesPath+"orders/messages/"+ids[7], key, &deleted)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if status, body := apiCall(t, method, base+queuesPath+"orders/messages/"+ids[7], key, nil); status != http.StatusNotFound ||
			!strings.Contains(body, "MessageNotFound") {
			t.Fatalf("%s of a deleted message answered %d %s", method, status, body)
		}
	}
	var purged struct{ Purged uint64 }
	apiOK(t, http.MethodPost, base+queuesPath+"orders/purge", key, &purged)
	if purged.Purged != n-2 {
		t.Fatalf("purge removed %d messages, want %d (the leased one included)", purged.Purged, n-2)
	}
	ar := c.Call(5, &fibp.Ack{Items: []fibp.AckItem{{Queue: "orders", MessageID: ds[1].MessageID}}}).(*fibp.AckResult)
	if ar.Results[0].ErrorCode != fibp.CodeMessageNotFound {
		t.Fatalf("the Ack of a purged leased message answered %v, want MessageNotFound", ar.Results[0].ErrorCode)
	}
	if left := peekAll(t, base, key, "orders", 10); len(left) != 0 {
		t.Fatalf("%d messages left after the purge", len(left))
	}

	// The log says the same after a restart.
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p = startServerEnv(t, bin, env, nil, args...)
	base = "http://" + p.addrs.HTTP
	if left := peekAll(t, base, key, "orders", 10); len(left) != 0 {
		t.Fatalf("after a restart, %d messages are back in the purged queue", len(left))
	}
	if dead := peekAll(t, base, key, "orders.dlq", 10); len(dead) != 1 || dead[0].ID != ids[0] {
		t.Fatalf("after a restart the dead-letter queue holds %+v", dead)
	}
}

// Who may do what: reading needs admin or consume on the queue, deleting and purging admin, as
// FIBP's ACL says; a key is checked as a Handshake checks it; web pages, bad counts and IDs,
// unknown queues and paths are refused with a status and a reason.
func TestMessagesAPIRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	p := startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	base, admin := "http://"+p.addrs.HTTP+queuesPath, handshake(t, p.addrs.FIBP, testBootstrapKey)
	if r := admin.Call(1, &fibp.CreateQueue{Name: "orders"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatal(r.ErrorCode)
	}
	res := admin.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "orders", Payload: []byte("x")}}}).(*fibp.EnqueueResult)
	id := res.Results[0].MessageID.String()
	reader, producer := newKey(t, admin, 3, "consume", "orders*"), newKey(t, admin, 5, "produce", "orders")

	for _, tc := range []struct {
		name, method, path, key string
		edit                    func(*http.Request)
		status                  int
		says                    string
	}{
		{"no key", "GET", "orders/messages", "", nil, 401, "Authorization: Bearer"},
		{"unknown key", "GET", "orders/messages", "not-a-key-of-this-server-0123456789", nil, 401, "unknown or revoked"},
		{"produce only", "GET", "orders/messages", producer, nil, 403, "lacks the admin or consume permission"},
		{"consume may not delete", "DELETE", "orders/messages/" + id, reader, nil, 403, "lacks the admin permission"},
		{"consume may not purge", "POST", "orders/purge", reader, nil, 403, "lacks the admin permission"},
		{"other queue", "GET", "payments/messages", reader, nil, 403, `on queue \"payments\"`},
		{"a web page", "GET", "orders/messages", testBootstrapKey, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403, "Origin"},
		{"purge without JSON", "POST", "orders/purge", testBootstrapKey, func(r *http.Request) { r.Header.Del("Content-Type") }, 415, "application/json"},
		{"count 0", "GET", "orders/messages?count=0", testBootstrapKey, nil, 400, "from 1 to 1000"},
		{"count 1001", "GET", "orders/messages?count=1001", testBootstrapKey, nil, 400, "from 1 to 1000"},
		{"bad after", "GET", "orders/messages?after=zzz", testBootstrapKey, nil, 400, "not a message ID"},
		{"bad ID", "GET", "orders/messages/42", testBootstrapKey, nil, 400, "not a message ID"},
		{"no queue", "GET", "nope/messages", testBootstrapKey, nil, 404, "QueueNotFound"},
		{"no purge of a missing queue", "POST", "nope/purge", testBootstrapKey, nil, 404, "QueueNotFound"},
		{"no such path", "GET", "orders/everything", testBootstrapKey, nil, 404, "no such admin API path"},
		{"GET purge", "GET", "orders/purge", testBootstrapKey, nil, 404, "no such admin API path"},
	} {
		if status, body := apiCall(t, tc.method, base+tc.path, tc.key, tc.edit); status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %s %s answered %d %s, want %d saying %q", tc.name, tc.method, tc.path, status, body, tc.status, tc.says)
		}
	}
	// The consume key reads the queue and its dead-letter queue (orders* matches orders.dlq).
	var page pageJSON
	apiOK(t, http.MethodGet, base+"orders/messages", reader, &page)
	if len(page.Messages) != 1 || page.Messages[0].ID != id {
		t.Fatalf("the consume key peeked %+v", page)
	}
	apiOK(t, http.MethodGet, base+"orders.dlq/messages", reader, &page)
	if status, _ := apiCall(t, "GET", base+"orders/messages/"+id, testBootstrapKey, nil); status != 200 {
		t.Fatalf("the refusals changed the queue: GET of %s answered %d", id, status)
	}

	// Without authentication, clients on loopback only.
	if ip := nonLoopbackIP(); ip != "" {
		p := startServer(t, bin, nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", ip+":0", "--log-level", "warn")
		if status, body := apiCall(t, "GET", "http://"+p.addrs.HTTP+queuesPath+"orders/messages", "", nil); status != 403 ||
			!strings.Contains(body, "loopback only") {
			t.Errorf("from %s without authentication: answered %d %s", ip, status, body)
		}
	}
}

// newKey creates an API key holding one permission and returns its secret.
func newKey(t *testing.T, admin *fibptest.Client, reqID uint32, kind, pattern string) string {
	t.Helper()
	k, ok := admin.Call(reqID, &fibp.CreateAPIKey{Name: kind}).(*fibp.CreateAPIKeyResult)
	if !ok || k.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateApiKey answered %#v", k)
	}
	acl := &fibp.SetACL{KeyID: k.KeyID, Permissions: []fibp.ACLPermission{{Kind: kind, Pattern: pattern}}}
	if r, ok := admin.Call(reqID+1, acl).(*fibp.SetACLResult); !ok || r.ErrorCode != fibp.CodeOk {
		t.Fatalf("SetAcl answered %#v", r)
	}
	return k.Key
}

// A page holds at most 4 MiB of payloads (its first message whole whatever its size), and says
// where to go on; a purge of more messages than one log entry removes (4,096) removes them all,
// and a restart agrees.
func TestPeekPagesAreBoundedAndPurgesRunInRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	args := []string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn"}
	p := startServer(t, bin, nil, args...)
	base := "http://" + p.addrs.HTTP
	c := handshake(t, p.addrs.FIBP, "")
	for i, q := range []string{"big", "many"} {
		if r := c.Call(uint32(i+1), &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatal(r.ErrorCode)
		}
	}
	const big = 3 << 19 // 1.5 MiB: two fit in a page's 4 MiB, three do not
	for i := range 3 {
		payload := []byte(strings.Repeat(fmt.Sprint(i), big))
		res := c.Call(uint32(10+i), &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "big", Payload: payload}}}).(*fibp.EnqueueResult)
		if res.Results[0].ErrorCode != fibp.CodeOk {
			t.Fatal(res.Results[0].ErrorCode)
		}
	}
	var page pageJSON
	apiOK(t, http.MethodGet, base+queuesPath+"big/messages?count=10", "", &page)
	if len(page.Messages) != 2 || page.Next != page.Messages[1].ID {
		t.Fatalf("the first page of three 1.5 MiB messages holds %d, next %q", len(page.Messages), page.Next)
	}
	for _, m := range page.Messages {
		if payload, _ := base64.StdEncoding.DecodeString(m.Payload); len(payload) != big || m.Size != big ||
			!m.Truncated || len(m.Preview) != previewBytes {
			t.Fatalf("a 1.5 MiB message came back with %d bytes, preview of %d", len(payload), len(m.Preview))
		}
	}
	if all := peekAll(t, base, "", "big", 10); len(all) != 3 {
		t.Fatalf("paging through big found %d messages", len(all))
	}

	const n = 10_000
	for b := range n / 1000 {
		req := &fibp.Enqueue{}
		for i := range 1000 {
			req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: "many", Payload: []byte(fmt.Sprint(b*1000 + i))})
		}
		for _, r := range c.Call(uint32(100+b), req).(*fibp.EnqueueResult).Results {
			if r.ErrorCode != fibp.CodeOk {
				t.Fatal(r.ErrorCode)
			}
		}
	}
	var purged struct{ Purged uint64 }
	start := time.Now()
	apiOK(t, http.MethodPost, base+queuesPath+"many/purge", "", &purged)
	t.Logf("purge of %d messages: %v", purged.Purged, time.Since(start))
	if purged.Purged != n {
		t.Fatalf("purge of %d messages removed %d", n, purged.Purged)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p = startServer(t, bin, nil, args...)
	if left := peekAll(t, "http://"+p.addrs.HTTP, "", "many", 1000); len(left) != 0 {
		t.Fatalf("after a restart, %d of the purged messages are back", len(left))
	}
}
