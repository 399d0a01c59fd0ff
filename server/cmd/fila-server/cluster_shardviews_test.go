package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/internal/fibptest"
)

// The admin API's per-queue views of a sharded queue (4 shards on 3 nodes) answer for the whole
// queue from every node: a peek merges the shards' messages by ID (after= paging across shards),
// the key list every shard's keys, one message and a key's explanation go to their shard, and
// purge and redrive act on every shard, answering the totals.
func TestTheAdminAPIActsOnAShardedQueueAsAWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin, "--queue-idle-timeout", "1h", "--http-listen", "127.0.0.1:0")
	const q, shards, nkeys, per = "wide", 4, 12, 3
	apiBody(t, nodes[0], http.MethodPost, "/api/v1/queues", fmt.Sprintf(`{"name": %q, "shards": %d, "max_attempts": 1}`, q, shards), http.StatusOK, nil)
	var ids []string
	shardOf := map[string]uint32{}
	perShard := make([]int, shards)
	for k := range nkeys {
		for m := range per {
			id := enqueueKeyed(t, nodes, q, fmt.Sprint("k", k), fmt.Sprint("k", k, "-", m))
			u, _ := wire.ParseUUID(id)
			shardOf[id] = shard.IndexOf(u, shards)
			perShard[shardOf[id]]++
			ids = append(ids, id)
		}
	}
	for i, n := range perShard {
		if n == 0 {
			t.Fatalf("shard %d holds none of the messages (%v): choose other keys", i, perShard)
		}
	}
	slices.Sort(ids)
	for _, n := range nodes {
		if got := peekEvery(t, n, q, 5); !slices.Equal(got, ids) {
			t.Fatalf("node %d: paging through %s (5 a page) gave %d messages %v, want every one by ID: %v", n.id, q, len(got), got, ids)
		}
		for _, sort := range []string{"name", "backlog"} {
			got := keyNames(t, n, q, sort)
			if slices.Sort(got); len(slices.Compact(got)) != nkeys {
				t.Fatalf("node %d lists fairness keys %v of %s by %s, want %d keys once each", n.id, got, q, sort, nkeys)
			}
		}
		var keys keyPageJSON
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+q+"/keys", http.StatusOK, &keys)
		if keys.Total != nkeys || len(keys.Keys) != nkeys || keys.Keys[0].Backlog != per {
			t.Fatalf("node %d: the key list of %s: %+v", n.id, q, keys)
		}
		var one pageJSON
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+q+"/messages?count=100&shard=1", http.StatusOK, &one)
		if len(one.Messages) != perShard[1] {
			t.Fatalf("node %d shows %d messages of shard 1, want %d", n.id, len(one.Messages), perShard[1])
		}
	}
	nodeAPI(t, "", nodes[0], http.MethodGet, "/api/v1/queues/"+q+"/messages?shard=4", http.StatusBadRequest, nil)
	nodeAPI(t, "", nodes[0], http.MethodGet, "/api/v1/queues/"+q+"/keys?after=k1", http.StatusBadRequest, nil)

	// One message, and a key's explanation, from its shard, on every node.
	var victim string
	for _, id := range ids {
		if shardOf[id] != 0 {
			victim = id
			break
		}
	}
	for _, n := range nodes {
		var m messageJSON
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+q+"/messages/"+victim, http.StatusOK, &m)
		if m.ID != victim || m.Queue != shardGroup(q, shardOf[victim]) {
			t.Fatalf("node %d answered message %s of %s for %s, of shard %d", n.id, m.ID, m.Queue, victim, shardOf[victim])
		}
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+q+"/messages/"+victim+"/explain", http.StatusOK, nil)
		var x struct {
			Key     string `json:"key"`
			Backlog uint64 `json:"backlog"`
		}
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+q+"/keys/k5/explain", http.StatusOK, &x)
		if x.Key != "k5" || x.Backlog != per {
			t.Fatalf("node %d explains key k5 of %s as %+v, want a backlog of %d", n.id, q, x, per)
		}
	}
	// A grouped queue's keys may sit in any shard: explaining one needs a shard named.
	apiBody(t, nodes[0], http.MethodPost, "/api/v1/queues", `{"name": "grouped", "shards": 2, "ordering": "grouped", "ordering_key": "header:g"}`, http.StatusOK, nil)
	nodeAPI(t, "", nodes[1], http.MethodGet, "/api/v1/queues/grouped/keys/k1/explain", http.StatusBadRequest, nil)
	for deadline := time.Now().Add(time.Minute); apiStatus(t, nodes[1], "/api/v1/queues/grouped/keys/k1/explain?shard=1") != http.StatusOK; {
		if time.Now().After(deadline) { // a safety net against a hang
			t.Fatal("node 2 never explained key k1 of shard 1 of grouped")
		}
		time.Sleep(20 * time.Millisecond)
	}

	nodeAPI(t, "", nodes[2], http.MethodDelete, "/api/v1/queues/"+q+"/messages/"+victim, http.StatusOK, nil)
	nodeAPI(t, "", nodes[1], http.MethodGet, "/api/v1/queues/"+q+"/messages/"+victim, http.StatusNotFound, nil)
	perShard[shardOf[victim]]--
	left := len(ids) - 1

	// Every message dead-lettered (max_attempts 1), from each shard's leader.
	deadLetterAll(t, nodes, q, perShard)
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for len(peekEvery(t, nodes[0], q+".dlq", 100)) != left {
		if time.Now().After(deadline) {
			t.Fatalf("%s.dlq never held the %d dead-lettered messages", q, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A dead-letter queue's shards hold their messages in the order they died, not by ID: paging
	// through it still shows each once.
	dead := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == victim })
	for _, n := range nodes {
		got := peekEvery(t, n, q+".dlq", 4)
		if slices.Sort(got); !slices.Equal(got, dead) {
			t.Fatalf("node %d: paging through %s.dlq (4 a page) gave %d messages %v, want each of %v once", n.id, q, len(got), got, dead)
		}
	}
	var rr struct {
		Redriven int `json:"redriven"`
	}
	apiBody(t, nodes[1], http.MethodPost, "/api/v1/queues/"+q+"/redrive", `{"count": 10}`, http.StatusOK, &rr)
	if rr.Redriven != 10 {
		t.Fatalf("a redrive of 10 through node 2 redrove %d", rr.Redriven)
	}
	apiBody(t, nodes[2], http.MethodPost, "/api/v1/queues/"+q+".dlq/redrive", `{}`, http.StatusOK, &rr)
	if rr.Redriven != left-10 {
		t.Fatalf("a redrive of the rest through node 3 redrove %d, want %d", rr.Redriven, left-10)
	}
	if got := peekEvery(t, nodes[0], q, 100); len(got) != left {
		t.Fatalf("after the redrives %s holds %d messages, want %d", q, len(got), left)
	}
	var purged struct {
		Purged int `json:"purged"`
	}
	nodeAPI(t, "", nodes[2], http.MethodPost, "/api/v1/queues/"+q+"/purge", http.StatusOK, &purged)
	if purged.Purged != left {
		t.Fatalf("a purge of %s through node 3 removed %d messages, want %d", q, purged.Purged, left)
	}
	if got := peekEvery(t, nodes[1], q, 100); len(got) != 0 {
		t.Fatalf("after the purge %s holds %d messages", q, len(got))
	}
}

// peekEvery pages through queue on node n, count a page, and returns the messages' IDs in the
// order shown.
func peekEvery(t *testing.T, n *clusterProc, queue string, count int) []string {
	t.Helper()
	var out []string
	after := ""
	for range 1000 {
		var page pageJSON
		nodeAPI(t, "", n, http.MethodGet, fmt.Sprintf("/api/v1/queues/%s/messages?count=%d&after=%s", queue, count, after), http.StatusOK, &page)
		for _, m := range page.Messages {
			out = append(out, m.ID)
		}
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
	t.Fatalf("node %d: paging through %s never ended", n.id, queue)
	return nil
}

// keyNames pages through queue's fairness keys on node n in sort's order, 5 a page.
func keyNames(t *testing.T, n *clusterProc, queue, sort string) []string {
	t.Helper()
	var out []string
	after := ""
	for range 1000 {
		var page keyPageJSON
		nodeAPI(t, "", n, http.MethodGet, "/api/v1/queues/"+queue+"/keys?limit=5&sort="+sort+"&after="+url.QueryEscape(after), http.StatusOK, &page)
		for _, k := range page.Keys {
			out = append(out, k.Key)
		}
		if page.Next == nil {
			return out
		}
		after = *page.Next
	}
	t.Fatalf("node %d: paging through %s's keys never ended", n.id, queue)
	return nil
}

// enqueueKeyed enqueues one message with fairness key key through any node that takes it, and
// returns its ID.
func enqueueKeyed(t *testing.T, nodes []*clusterProc, queue, key, payload string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for reqID := uint32(1); ; reqID++ {
		for _, n := range nodes {
			c := fibptest.Dial(t, n.addrs.FIBP)
			c.Handshake()
			r := c.Call(reqID, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: queue, FairnessKey: wire.Some(key), Payload: []byte(payload)}}}).(*fibp.EnqueueResult)
			c.NC.Close()
			switch code := r.Results[0].ErrorCode; code {
			case fibp.CodeOk:
				return r.Results[0].MessageID.String()
			case fibp.CodeNotLeader, fibp.CodeNodeNotReady, fibp.CodeQueueNotFound:
			default:
				t.Fatalf("enqueue on node %d: %v", n.id, code)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node took an enqueue to %s within a minute", queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deadLetterAll consumes and nacks every message of queue (max_attempts 1): on each node, the
// messages of the shards it leads (perShard by index).
func deadLetterAll(t *testing.T, nodes []*clusterProc, queue string, perShard []int) {
	t.Helper()
	var shardRoutes []fibp.ShardRoute
	for _, e := range admin(t, nodes[0], &fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: queue}}}).(*fibp.GetRoutesResult).Entries {
		shardRoutes = e.Shards
	}
	if len(shardRoutes) != len(perShard) {
		t.Fatalf("GetRoutes names %d shards of %s, want %d", len(shardRoutes), queue, len(perShard))
	}
	for _, n := range nodes {
		want := 0
		for _, s := range shardRoutes {
			if s.LeaderNodeID == uint64(n.id) {
				want += perShard[s.ShardIndex]
			}
		}
		if want == 0 {
			continue
		}
		c := fibptest.Dial(t, n.addrs.FIBP)
		c.Handshake()
		c.Subscribe(1, queue, 100)
		var items []fibp.NackItem
		for _, d := range c.Deliveries(want) {
			items = append(items, fibp.NackItem{Queue: queue, MessageID: d.MessageID, Error: "no"})
		}
		c.Call(2, &fibp.Nack{Items: items})
		c.NC.Close()
	}
}

// apiBody sends an admin API request with a JSON body to node n, expects status and decodes the
// answer into out.
func apiBody(t *testing.T, n *clusterProc, method, path, body string, status int, out any) {
	t.Helper()
	nodeRequest(t, "", n, method, path, body, status, out)
}

// apiStatus is the status node n answers a GET of path with.
func apiStatus(t *testing.T, n *clusterProc, path string) int {
	t.Helper()
	res, err := http.Get("http://" + n.addrs.HTTP + path)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}
