package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// The admin API's views of a queue's messages and keys, and its message deletion and purge,
// answer on every node of a cluster: a node that follows the queue's group hands the request to
// its leader. Before, such a node answered 404 ("was deleted") for a queue awake elsewhere.
func TestTheAdminAPIAnswersAboutEveryQueueOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin, "--queue-idle-timeout", "1h", "--http-listen", "127.0.0.1:0")
	const q = "views"
	if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue: %v", r.ErrorCode)
	}
	for m := range 3 {
		enqueueOnLeader(t, nodes, q, fmt.Sprint("m", m))
	}
	leader := routes(t, nodes[0])[q]
	var ids []string
	for _, n := range nodes {
		var page struct {
			Messages []struct {
				ID string `json:"id"`
			} `json:"messages"`
		}
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+q+"/messages?count=10", http.StatusOK, &page)
		if len(page.Messages) != 3 {
			t.Fatalf("node %d (the leader is %d) shows %d messages of %s, want 3", n.id, leader, len(page.Messages), q)
		}
		var keys struct {
			Total int `json:"total"`
		}
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+q+"/keys", http.StatusOK, &keys)
		if keys.Total != 1 {
			t.Fatalf("node %d shows %d fairness keys of %s, want 1", n.id, keys.Total, q)
		}
		ids = ids[:0]
		for _, m := range page.Messages {
			ids = append(ids, m.ID)
		}
	}
	follower := nodes[leader%3] // the node after the leader
	nodeAPI(t, "", follower, http.MethodGet, "/api/v1/queues/"+q+"/messages/"+ids[0], http.StatusOK, nil)
	nodeAPI(t, "", follower, http.MethodDelete, "/api/v1/queues/"+q+"/messages/"+ids[0], http.StatusOK, nil)
	if st := admin(t, nodes[leader-1], &fibp.GetStats{Queue: q}).(*fibp.GetStatsResult); st.Depth != 2 {
		t.Fatalf("after a deletion through node %d the leader counts %d messages, want 2", follower.id, st.Depth)
	}
	var purged struct {
		Purged int `json:"purged"`
	}
	nodeAPI(t, "", follower, http.MethodPost, "/api/v1/queues/"+q+"/purge", http.StatusOK, &purged)
	if purged.Purged != 2 {
		t.Fatalf("a purge through node %d removed %d messages, want 2", follower.id, purged.Purged)
	}
	nodeAPI(t, "", follower, http.MethodGet, "/api/v1/queues/nosuch/messages", http.StatusNotFound, nil)
}

// nodeAPI sends an admin API request to node n (with key, when set; a POST with an empty JSON
// object), expects status and decodes the answer into out.
func nodeAPI(t *testing.T, key string, n *clusterProc, method, path string, status int, out any) {
	t.Helper()
	body := ""
	if method == http.MethodPost {
		body = "{}"
	}
	nodeRequest(t, key, n, method, path, body, status, out)
}

// nodeRequest sends an admin API request with body (JSON; "": none) to node n, with key when set,
// expects status and decodes the answer into out.
func nodeRequest(t *testing.T, key string, n *clusterProc, method, path, body string, status int, out any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+n.addrs.HTTP+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		t.Fatalf("node %d: %s %s answered %d %s, want %d", n.id, method, path, res.StatusCode, b, status)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("node %d: %s %s: %v in %s", n.id, method, path, err, b)
		}
	}
}

// With authentication on, a request handed to the queue's leader is authenticated there again with
// the caller's key: the bootstrap key reads through a follower, a wrong key is refused.
func TestTheAdminAPIHandsOnTheCallersKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	const boot = "bootstrap-secret-of-at-least-32-characters"
	keyFile := filepath.Join(t.TempDir(), "bootstrap.key")
	if err := os.WriteFile(keyFile, []byte(boot), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	nodes := []*clusterProc{{id: 1, dir: t.TempDir()}, {id: 2, dir: t.TempDir()}, {id: 3, dir: t.TempDir()}}
	startCluster(t, bin, nodes, addrs, "--initial-cluster", fmt.Sprintf("1=%s,2=%s,3=%s", addrs[0], addrs[1], addrs[2]),
		"--bootstrap-api-key-file", keyFile, "--http-listen", "127.0.0.1:0", "--queue-idle-timeout", "1h")
	const q = "keyed"
	nodeAPI(t, boot, nodes[0], http.MethodPost, "/api/v1/queues/"+q+"/purge", http.StatusNotFound, nil)
	c := fibptest.Dial(t, nodes[0].addrs.FIBP)
	if f, ok := c.HandshakeKey(boot).(*fibp.HandshakeOk); !ok {
		t.Fatalf("handshake with the bootstrap key: %#v", f)
	}
	if r := c.Call(1, &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue: %v", r.ErrorCode)
	}
	var leader uint64
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for reqID := uint32(2); leader == 0; reqID++ {
		r := c.Call(reqID, &fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: q}}}).(*fibp.GetRoutesResult)
		if r.ErrorCode == fibp.CodeOk && len(r.Entries) == 1 {
			leader = r.Entries[0].LeaderNodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader of %s known within a minute", q)
		}
		time.Sleep(20 * time.Millisecond)
	}
	follower := nodes[leader%3]
	var page struct {
		Queue string `json:"queue"`
	}
	nodeAPI(t, boot, follower, http.MethodGet, "/api/v1/queues/"+q+"/messages", http.StatusOK, &page)
	if page.Queue != q {
		t.Fatalf("node %d answered a peek of %s for %q", follower.id, q, page.Queue)
	}
	nodeAPI(t, "", follower, http.MethodGet, "/api/v1/queues/"+q+"/messages", http.StatusUnauthorized, nil)
	nodeAPI(t, "not-the-key-of-anyone-at-all-0123456789", follower, http.MethodGet, "/api/v1/queues/"+q+"/messages", http.StatusUnauthorized, nil)
}

// The admin API's queue list and queue row show every queue with its leader's figures on every
// node, and a sharded queue once with all its shards summed. Before, a node listed only the
// queues it led or held asleep (a follower's replica holds the log, not the figures), and a
// sharded queue's row summed only the shards the answering node led.
func TestTheAdminAPIListsEveryQueueOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin, "--queue-idle-timeout", "1h", "--http-listen", "127.0.0.1:0")
	depth := queuesOfDepths(t, nodes, "l", 6)
	var created struct {
		Shards int `json:"shards"`
	}
	apiBody(t, nodes[1], http.MethodPost, "/api/v1/queues", `{"name": "sh", "shards": 4}`, http.StatusOK, &created)
	for m := range 12 {
		enqueueKeyed(t, nodes, "sh", fmt.Sprint("k", m), "x")
	}
	depth["sh"] = 12
	depth["orders"] = 0 // formCluster's
	for _, n := range nodes {
		var list struct {
			Queues []struct {
				Name  string `json:"name"`
				Depth int    `json:"depth"`
			} `json:"queues"`
			Total int `json:"total"`
		}
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues?limit=100", http.StatusOK, &list)
		got := map[string]int{}
		for _, q := range list.Queues {
			got[q.Name] = q.Depth
		}
		if list.Total != len(depth) || fmt.Sprint(got) != fmt.Sprint(depth) {
			t.Fatalf("node %d lists %v (total %d), want %v", n.id, got, list.Total, depth)
		}
		var row struct {
			Depth int `json:"depth"`
		}
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/sh", http.StatusOK, &row)
		if row.Depth != 12 {
			t.Fatalf("node %d: the row of the 4-shard queue has depth %d, want 12", n.id, row.Depth)
		}
	}
}
