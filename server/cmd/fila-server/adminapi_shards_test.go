package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// On a single node with authentication, a sharded queue's views answer for the whole queue, and
// each shard's part is authorized with the caller's key on the queue's name: a key with consume
// on the queue peeks every shard, and may not purge it.
func TestAShardedQueuesViewsOnOneNodeWithKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	args := []string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn"}
	p := startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, args...)
	base, boot := "http://"+p.addrs.HTTP, testBootstrapKey
	send := func(method, path, key, body string) (int, string) {
		return apiCall(t, method, base+path, key, func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
		})
	}
	if status, body := send(http.MethodPost, "/api/v1/queues", boot, `{"name": "wide", "shards": 4}`); status != http.StatusOK {
		t.Fatalf("creating a sharded queue: %d %s", status, body)
	}
	var k struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	status, body := send(http.MethodPost, "/api/v1/keys", boot, `{"name": "reader"}`)
	if status != http.StatusOK || json.Unmarshal([]byte(body), &k) != nil {
		t.Fatalf("creating a key: %d %s", status, body)
	}
	if status, body := send(http.MethodPut, "/api/v1/keys/"+k.ID+"/acl", boot, `{"acl": [{"kind": "consume", "pattern": "wide"}]}`); status != http.StatusOK {
		t.Fatalf("setting an ACL: %d %s", status, body)
	}
	c := handshake(t, p.addrs.FIBP, boot)
	req := &fibp.Enqueue{}
	for i := range 12 {
		req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: "wide", Payload: []byte("m"), FairnessKey: wire.Some(fmt.Sprint("k", i))})
	}
	for _, r := range c.Call(1, req).(*fibp.EnqueueResult).Results {
		if r.ErrorCode != fibp.CodeOk {
			t.Fatal(r.ErrorCode)
		}
	}
	if got := peekAll(t, base, k.Secret, "wide", 5); len(got) != 12 {
		t.Fatalf("the consume key peeked %d messages of wide, want 12", len(got))
	}
	if status, body := send(http.MethodPost, queuesPath+"wide/purge", k.Secret, `{}`); status != http.StatusForbidden {
		t.Fatalf("the consume key's purge answered %d %s, want 403", status, body)
	}
	if status, body := send(http.MethodGet, queuesPath+"wide.dlq/messages", k.Secret, ""); status != http.StatusForbidden {
		t.Fatalf("the consume key's peek of wide.dlq answered %d %s, want 403", status, body)
	}
	var purged struct {
		Purged int `json:"purged"`
	}
	apiOK(t, http.MethodPost, base+queuesPath+"wide/purge", boot, &purged)
	if purged.Purged != 12 {
		t.Fatalf("the purge of wide removed %d messages, want 12", purged.Purged)
	}
}
