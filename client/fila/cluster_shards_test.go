package fila_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/shard"
)

// A 4-shard queue on a three-node cluster of real fila-server processes, under enqueue, consume
// and ack load, with a kill -9 of a node that leads a shard: every enqueue answered Ok is
// delivered, messages of one ordering group are first delivered in the order they were
// enqueued, and a repeated idempotency key is answered with the first message's ID. The
// consumers are plain Clients, one per node: each subscribes where GetRoutes says shards are led
// (a node's Consume of a sharded queue subscribes to the shards it leads) and subscribes again
// when that changes.
func TestShardedQueueSurvivesAShardLeaderKill(t *testing.T) { shardLeaderKill(t, false) }

// The same through the SDK: one ClusterConsumer, which subscribes on every node that leads a
// shard and follows the shards' moves.
func TestClusterConsumesAShardedQueue(t *testing.T) { shardLeaderKill(t, true) }

func shardLeaderKill(t *testing.T, sdk bool) {
	const shards, groups = 4, 16
	tc := startTestCluster(t)
	for _, bad := range []string{`{"name": "b", "shards": 0}`, `{"name": "b", "shards": 65}`, `{"name": "b", "shards": 2, "ordering": "queue"}`} {
		if code, answer := postQueue(t, tc.nodes[1], bad); code != http.StatusBadRequest {
			t.Fatalf("POST %s: %d %s, want 400", bad, code, answer)
		}
	}
	createShardedQueue(t, tc.nodes[0], "orders", shards)
	prod := dialTestCluster(t, tc.seeds(), nil)
	h := &shardHistory{history: history{acked: map[fila.MessageID]bool{}, delivered: map[fila.MessageID]int{}},
		ids: map[string]fila.MessageID{}, firstSeq: map[string][]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 6*serverWait) // a safety net
	defer cancel()
	routes := waitShardLeaders(ctx, t, prod, "orders", shards)
	checkWholeQueue(ctx, t, tc, prod, groups)
	if sdk { // a shard's leader moves as a queue's does, named by its group
		routes = moveShardLeader(ctx, t, tc, prod, routes, 1)
	}

	stop := make(chan struct{})
	var consumers sync.WaitGroup
	if sdk {
		sub, err := dialTestCluster(t, tc.seeds(), nil).Consume(ctx, "orders", fila.ConsumeOptions{MaxUnacked: 64})
		if err != nil {
			t.Fatal(err)
		}
		consumers.Go(func() { consumeAll(ctx, stop, sub, h) })
		defer func() { t.Logf("the SDK's subscription is on %s, made again %d times", sub.Node(), sub.Moves()) }()
	} else {
		for _, n := range tc.nodes {
			consumers.Go(func() { consumeShardsOn(ctx, stop, n.addr, h) })
		}
	}
	var produced sync.WaitGroup
	stopProducing := make(chan struct{})
	produced.Go(func() { produceGroups(ctx, stopProducing, prod, h, groups) })

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("%s: %d acknowledged, %d of them not delivered; errors %v", what, h.ackedCount(), h.missing(), h.errs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	target := 300
	waitFor("before the kill", func() bool { return h.ackedCount() >= target && h.missing() < h.ackedCount() })
	victim := tc.byAddr(routes[2]) // shard 2's leader
	start := time.Now()
	victim.p.Kill()
	target = h.ackedCount() + 300
	waitFor("after the kill", func() bool { return h.ackedCount() >= target })
	t.Logf("node %d, leading shard 2, killed; 300 more enqueues answered Ok %v later", victim.id, time.Since(start).Round(time.Millisecond))
	if err := victim.start(); err != nil {
		t.Fatal(err)
	}
	target = h.ackedCount() + 200
	waitFor("after the node came back", func() bool { return h.ackedCount() >= target })
	close(stopProducing)
	produced.Wait()
	waitFor("draining", func() bool { return h.missing() == 0 })
	if sdk { // the producer routes each message by its shard: it learns where every shard is led
		waitFor("the producer learning the shards' leaders", func() bool { return routesLearned(ctx, t, prod, shards, groups) })
	}
	close(stop)
	consumers.Wait()

	h.mu.Lock()
	defer h.mu.Unlock()
	perShard := make([]int, shards)
	for id := range h.acked {
		perShard[shard.IndexOf(id, shards)]++
	}
	t.Logf("%d enqueues acknowledged, all delivered (per shard %v); %d repeats answered with the first ID; %d acks answered MessageNotFound",
		len(h.acked), perShard, h.dups, h.ackLost)
	for i, n := range perShard {
		if n == 0 {
			t.Errorf("shard %d got no message", i)
		}
	}
	for _, err := range h.errs {
		t.Error(err)
	}
	for g, seqs := range h.firstSeq {
		if !slices.IsSorted(seqs) {
			t.Errorf("group %s first delivered out of order: %v", g, seqs)
		}
	}
	if h.dups == 0 {
		t.Error("no repeated idempotency key was answered")
	}
}

// shardHistory is history with what ordering and deduplication need.
type shardHistory struct {
	history
	ids      map[string]fila.MessageID // idempotency key → the ID its first Ok answer gave
	dups     int                       // repeats answered Ok
	firstSeq map[string][]int          // per group, the sequence numbers in order of first delivery
}

// produceGroups enqueues batches of messages of groups ordering groups, each message's payload
// its group's next sequence number, each batch sent twice (the repeat must be answered with the
// same IDs), one batch at a time so that a group's messages are enqueued in sequence order.
func produceGroups(ctx context.Context, stop chan struct{}, prod *fila.Cluster, h *shardHistory, groups int) {
	next := make([]int, groups)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for b := 0; ; b++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		msgs := make([]fila.Message, groups)
		for g := range msgs {
			key := fmt.Sprintf("g%d-%d", g, next[g])
			msgs[g] = fila.Message{Queue: "orders", Headers: map[string]string{"g": strconv.Itoa(g)}, Payload: []byte(strconv.Itoa(next[g])),
				IdempotencyKey: key}
		}
		for range 2 {
			res, err := prod.Enqueue(ctx, msgs...)
			if err != nil {
				h.fail("enqueue", err)
				continue
			}
			h.record(msgs, res)
		}
		for g := range next {
			next[g]++ // a message not answered Ok is never delivered in sequence: a gap, not disorder
		}
	}
}

func (h *shardHistory) record(msgs []fila.Message, res []fila.EnqueueResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range res {
		if r.Err != nil {
			if len(h.errs) < 20 && !errors.Is(r.Err, fila.ErrNodeNotReady) && !errors.Is(r.Err, fila.ErrNotLeader) {
				h.errs = append(h.errs, fmt.Errorf("enqueue item: %w", r.Err))
			}
			continue
		}
		key := msgs[i].IdempotencyKey
		if first, ok := h.ids[key]; ok {
			h.dups++
			if first != r.ID && len(h.errs) < 20 {
				h.errs = append(h.errs, fmt.Errorf("idempotency key %s answered %v, then %v", key, first, r.ID))
			}
			continue
		}
		h.ids[key] = r.ID
		h.acked[r.ID] = true
	}
}

// consumeShardsOn consumes orders on the node at addr while it leads a shard, subscribing again
// whenever the shards it leads change (or its connection ends), until stop.
func consumeShardsOn(ctx context.Context, stop chan struct{}, addr string, h *shardHistory) {
	for ctx.Err() == nil {
		select {
		case <-stop:
			return
		default:
		}
		c, err := fila.Dial(ctx, addr, nil)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		consumeWhileLeading(ctx, stop, c, addr, h)
		c.Close()
	}
}

// consumeWhileLeading subscribes once, if the node leads a shard, and consumes until the shards
// it leads change, the subscription ends or stop.
func consumeWhileLeading(ctx context.Context, stop chan struct{}, c *fila.Client, addr string, h *shardHistory) {
	led := func() string {
		rs, err := c.GetRoutes(ctx, "orders")
		if err != nil || len(rs) != 1 {
			return "?"
		}
		var mine []string
		for _, s := range rs[0].Shards {
			if s.LeaderAddr == addr {
				mine = append(mine, strconv.Itoa(int(s.ShardIndex)))
			}
		}
		return strings.Join(mine, ",")
	}
	at := led()
	if at == "" || at == "?" {
		time.Sleep(100 * time.Millisecond)
		return
	}
	sub, err := c.Consume(ctx, "orders", fila.ConsumeOptions{MaxUnacked: 64})
	if err != nil {
		time.Sleep(50 * time.Millisecond)
		return
	}
	defer sub.Close()
	check := time.NewTicker(200 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case <-stop:
			return
		case <-check.C:
			if led() != at {
				return
			}
		case d, ok := <-sub.C():
			if !ok {
				return
			}
			h.settle(ctx, d)
		}
	}
}

// consumeAll consumes sub until stop.
func consumeAll(ctx context.Context, stop chan struct{}, sub *fila.ClusterConsumer, h *shardHistory) {
	defer sub.Close()
	for {
		select {
		case <-stop:
			return
		case d, ok := <-sub.C():
			if !ok {
				h.fail("the subscription stopped", sub.Err())
				return
			}
			h.settle(ctx, d)
		}
	}
}

// settle records d and acks it.
func (h *shardHistory) settle(ctx context.Context, d *fila.Delivery) {
	h.delivery(d)
	switch err := d.Ack(ctx); {
	case errors.Is(err, fila.ErrMessageNotFound):
		h.mu.Lock()
		h.ackLost++
		h.mu.Unlock()
	case err != nil && !errors.Is(err, fila.ErrDisconnected) && !errors.Is(err, fila.ErrConnectionLost):
		h.fail("ack", err) // a killed node's connection ends: its leases expire, the message comes again
	}
}

func (h *shardHistory) delivery(d *fila.Delivery) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.delivered[d.ID]++
	if h.delivered[d.ID] == 1 {
		seq, _ := strconv.Atoi(string(d.Payload))
		h.firstSeq[d.Headers["g"]] = append(h.firstSeq[d.Headers["g"]], seq)
	}
}

// createShardedQueue creates a grouped queue of shards shards through n's HTTP admin API.
func createShardedQueue(t *testing.T, n *clusterNode, queue string, shards int) {
	t.Helper()
	body := fmt.Sprintf(`{"name": %q, "shards": %d, "ordering": "grouped", "ordering_key": "header:g"}`, queue, shards)
	if code, answer := postQueue(t, n, body); code != http.StatusOK {
		t.Fatalf("POST /api/v1/queues: %d %s", code, answer)
	}
}

// postQueue posts body to n's POST /api/v1/queues and returns the answer's status and body.
func postQueue(t *testing.T, n *clusterNode, body string) (int, string) {
	t.Helper()
	res, err := http.Post(strings.TrimSuffix(n.metrics, "/metrics")+"/api/v1/queues", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(answer)
}

// waitShardLeaders waits until GetRoutes names a leader for each of queue's shards, and returns
// their addresses by shard index.
func waitShardLeaders(ctx context.Context, t *testing.T, c *fila.Cluster, queue string, shards int) []string {
	t.Helper()
	for {
		if any, err := c.Any(ctx); err == nil {
			rs, err := any.GetRoutes(ctx, queue)
			if err == nil && len(rs) == 1 && len(rs[0].Shards) == shards &&
				!slices.ContainsFunc(rs[0].Shards, func(s fila.ShardRoute) bool { return s.LeaderAddr == "" }) {
				out := make([]string, shards)
				for _, s := range rs[0].Shards {
					out[s.ShardIndex] = s.LeaderAddr
				}
				return out
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the shards of %s have no known leaders", queue)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkWholeQueue enqueues a message of each of groups ordering groups (spread over the shards)
// and checks that every node answers the queue as a whole: GetStats and ListQueues count them
// all, in one row.
func checkWholeQueue(ctx context.Context, t *testing.T, tc *testCluster, prod *fila.Cluster, groups int) {
	t.Helper()
	for g := range groups {
		res, err := prod.Enqueue(ctx, fila.Message{Queue: "orders", Headers: map[string]string{"g": strconv.Itoa(g)}, Payload: []byte("-1")})
		if err != nil || res[0].Err != nil {
			t.Fatalf("enqueue: %v %+v", err, res)
		}
	}
	for _, n := range tc.nodes {
		c, err := fila.Dial(ctx, n.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.GetStats(ctx, "orders")
		if err != nil || st.Depth != uint64(groups) {
			t.Fatalf("GetStats through node %d: depth %v, %v; want %d", n.id, st, err, groups)
		}
		l, err := c.ListQueues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range l.Queues {
			names = append(names, q.Name)
			if q.Name == "orders" && q.Depth != uint64(groups) {
				t.Fatalf("ListQueues through node %d: orders has depth %d, want %d", n.id, q.Depth, groups)
			}
		}
		if !slices.Equal(names, []string{"orders", "orders.dlq"}) {
			t.Fatalf("ListQueues through node %d: %v", n.id, names)
		}
		c.Close()
	}
}

// moveShardLeader moves shard i's leadership to another node (MoveQueueLeader of its group,
// orders*i) and returns the shards' leaders once GetRoutes names the new one.
func moveShardLeader(ctx context.Context, t *testing.T, tc *testCluster, prod *fila.Cluster, routes []string, i uint32) []string {
	t.Helper()
	var target *clusterNode
	for _, n := range tc.nodes {
		if n.addr != routes[i] {
			target = n
			break
		}
	}
	any, err := prod.Any(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := any.MoveQueueLeader(ctx, shard.Name("orders", i), uint64(target.id)); err != nil {
		t.Fatalf("moving shard %d to node %d: %v", i, target.id, err)
	}
	for {
		now := waitShardLeaders(ctx, t, prod, "orders", len(routes))
		if now[i] == target.addr {
			return now
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// routesLearned enqueues a message of each of groups ordering groups (after every other: its
// sequence number is the largest) and reports whether prod
// then routes each shard's messages to the shard's leader (leaderships may still move after a
// node came back: rebalancing).
func routesLearned(ctx context.Context, t *testing.T, prod *fila.Cluster, shards, groups int) bool {
	t.Helper()
	for g := range groups {
		if _, err := prod.Enqueue(ctx, fila.Message{Queue: "orders", Headers: map[string]string{"g": strconv.Itoa(g)}, Payload: []byte("999999999")}); err != nil {
			return false
		}
	}
	now := waitShardLeaders(ctx, t, prod, "orders", shards)
	for i := range uint32(shards) {
		if addr, ok := prod.Route(shard.Name("orders", i)); !ok || addr != now[i] {
			return false
		}
	}
	return true
}
