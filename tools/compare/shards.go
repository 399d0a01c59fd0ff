package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// One sharded queue on a cluster (docs/sharding.md): the lifecycle (enqueue -> consume -> ack,
// 1 KB, fsync) of one queue created with 1, 2 and then 4 shards through the admin HTTP API. Every
// node that leads shards of the queue (GetRoutes' shards) gets what cluster_lifecycle_1kb_4c gives
// the queue's leader: lifecycleProducers producers, whose Enqueue frames carry only messages of the
// shards that node leads (routed by shard as the Go SDK does, with generated/shard, over
// shardsKeysPer fairness keys per shard), and lifecycleConsumers consumer connections of
// consumerCredit each (a node's subscription covers every shard it leads, and the credit is given
// to each shard). With 1 shard that is cluster_lifecycle_1kb_4c over fairness keys. The SHARDS
// line sets 2 and 4 shards against 1:
//
//	SHARDS one=9000 two=12000 four=15000 ratio2=1.333 ratio4=1.667 unit=msg/s
//
// NATS has no counterpart (n/a).

const (
	shardsOne          = "cluster_shards1_lifecycle_1kb"
	shardsTwo          = "cluster_shards2_lifecycle_1kb"
	shardsFour         = "cluster_shards4_lifecycle_1kb"
	lifecycleConsumers = 4  // consumer connections per node that leads shards: cluster_lifecycle_1kb_4c's
	shardsKeysPer      = 16 // fairness keys per shard
)

// shardsFigures are the three lifecycle throughputs, 1, 2 and 4 shards.
func shardsFigures() []figure {
	return slices.Concat(throughput(shardsOne, 1), throughput(shardsTwo, 1), throughput(shardsFour, 1))
}

// filaShardsLifecycle measures the lifecycle of a queue of 1, 2 and 4 shards, in the same cluster.
func filaShardsLifecycle(ctx context.Context, e *env, p *peer) ([]float64, error) {
	if p.cluster == nil || p.cluster.nodes[0].http == "" {
		return nil, fmt.Errorf("the sharded lifecycle needs a cluster serving the admin HTTP API")
	}
	var out []float64
	for _, n := range []int{1, 2, 4} {
		queue := fmt.Sprint("sharded", n)
		if err := createShardedQueue(ctx, p.cluster, queue, n, ""); err != nil {
			return nil, err
		}
		rate, err := e.shardedLifecycle(ctx, p.cluster, queue, n)
		if err != nil {
			return nil, fmt.Errorf("%d shards: %w", n, err)
		}
		out = append(out, rate)
	}
	return out, nil
}

// shardedLifecycle pre-fills queue over its shards' leaders, then measures acknowledged messages
// per second while every shard leader's producers keep enqueueing and its consumers consume.
func (e *env) shardedLifecycle(ctx context.Context, c *cluster, queue string, n int) (float64, error) {
	leaders, err := shardLeaders(ctx, c, queue, n)
	if err != nil {
		return 0, err
	}
	byNode := shardsByNode(leaders)
	keys := shardKeys(n, shardsKeysPer)
	fmt.Fprintf(os.Stderr, "   fila: %s: %s\n", queue, describeLeaders(leaders))

	var fill []*filaLoad
	filled := func() int64 { return sumLoads(fill, func(l *filaLoad) int64 { return l.enqueued.Load() }) }
	for addr, shards := range byNode {
		l := newFilaLoad(addr, queue, 1024)
		l.limit = e.o.prefill * int64(len(shards)) / int64(n)
		fill = append(fill, l)
		if err := l.produceKeys(lifecycleProducers, nodeKeys(keys, shards)); err != nil {
			stopLoads(fill)
			return 0, err
		}
	}
	done := make(chan struct{})
	go func() {
		for _, l := range fill {
			l.wg.Wait()
		}
		close(done)
	}()
	err = e.waitFillAt(ctx, "fila prefill", filled, done, e.o.prefill*9/10)
	stopLoads(fill)
	if err != nil {
		return 0, err
	}

	// Leaders may move while the shards are filled on a busy machine: the routes are asked again,
	// and the load started again, while a subscription is refused.
	var loads []*filaLoad
	defer func() { stopLoads(loads) }()
	for try := 1; ; try++ {
		if loads, err = startShardLoads(byNode, keys, queue); err == nil {
			break
		}
		stopLoads(loads)
		loads = nil
		if try == 5 {
			return 0, err
		}
		fmt.Fprintf(os.Stderr, "   fila: subscribing again: %v\n", err)
		if leaders, err = shardLeaders(ctx, c, queue, n); err != nil {
			return 0, err
		}
		byNode = shardsByNode(leaders)
	}
	return e.measureRate(ctx, fmt.Sprintf("fila lifecycle of %d shards", n), func() int64 {
		return sumLoads(loads, func(l *filaLoad) int64 { return l.acked.Load() })
	})
}

// startShardLoads starts, on every node that leads shards, its consumers and then its producers.
func startShardLoads(byNode map[string][]int, keys [][]string, queue string) ([]*filaLoad, error) {
	var loads []*filaLoad
	for addr, shards := range byNode {
		l := newFilaLoad(addr, queue, 1024)
		loads = append(loads, l)
		if err := l.consume(lifecycleConsumers); err != nil {
			return loads, fmt.Errorf("consume on %s (leader of shards %v): %w", addr, shards, err)
		}
	}
	for _, l := range loads {
		if err := l.produceKeys(lifecycleProducers, nodeKeys(keys, byNode[l.addr])); err != nil {
			return loads, err
		}
	}
	return loads, nil
}

func sumLoads(ls []*filaLoad, v func(*filaLoad) int64) int64 {
	var s int64
	for _, l := range ls {
		s += v(l)
	}
	return s
}

// shardKeys are per keys fairness keys for each of n shards, by shard: the first names k0, k1, ...
// that hash there (generated/shard, as the server and the SDK hash a message with a fairness key
// and nothing else to go by).
func shardKeys(n, per int) [][]string {
	out := make([][]string, n)
	plan := shard.Plan{Shards: uint32(n)}
	for i, full := 0, 0; full < n; i++ {
		k := fmt.Sprint("k", i)
		s := plan.Of(&shard.Message{FairnessKey: k})
		if len(out[s]) < per {
			if out[s] = append(out[s], k); len(out[s]) == per {
				full++
			}
		}
	}
	return out
}

// nodeKeys are the keys of the given shards.
func nodeKeys(keys [][]string, shards []int) []string {
	var out []string
	for _, s := range shards {
		out = append(out, keys[s]...)
	}
	return out
}

// produceKeys starts n producers on the load's node, each keeping batchWindow Enqueue frames of
// batchSize messages in flight, the messages' fairness keys taken in turn from keys.
func (l *filaLoad) produceKeys(n int, keys []string) error {
	for p := range n {
		c, err := l.dial()
		if err != nil {
			return err
		}
		req := &fibp.Enqueue{Messages: make([]fibp.EnqueueMessage, batchSize)}
		for i := range req.Messages {
			req.Messages[i] = fibp.EnqueueMessage{Queue: l.queue, Payload: l.payload,
				FairnessKey: wire.Some(keys[(p+i)%len(keys)])}
		}
		l.wg.Go(func() { l.produceLoop(c, req) })
	}
	return nil
}

// createShardedQueue creates queue with n shards (and the extra JSON settings, "" for none)
// through the admin HTTP API of the cluster's first node, again while the cluster cannot yet.
func createShardedQueue(ctx context.Context, c *cluster, queue string, n int, extra string) error {
	body := fmt.Sprintf(`{"name": %q, "shards": %d%s}`, queue, n, extra)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		code, answer, err := postJSON(ctx, c.nodes[0].http+"/api/v1/queues", body)
		switch {
		case err == nil && code == http.StatusOK:
			return nil
		case err == nil && code >= 400 && code < 500:
			return fmt.Errorf("create queue %s of %d shards: %d %s", queue, n, code, answer)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create queue %s of %d shards: %d %s %v: %w", queue, n, code, answer, err, ctx.Err())
		case <-time.After(probeWait):
		}
	}
}

func postJSON(ctx context.Context, url, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	var v any
	if json.Unmarshal(b, &v) == nil {
		b, _ = json.Marshal(v)
	}
	return res.StatusCode, strings.TrimSpace(string(b)), nil
}

// shardLeaders asks the cluster's nodes for queue's routes until every one of its n shards has a
// leader among the nodes, and returns the leaders' client addresses by shard index.
func shardLeaders(ctx context.Context, c *cluster, queue string, n int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		for _, nd := range c.nodes {
			leaders, err := shardRoutesFrom(nd.addr, queue, n, c)
			if err == nil {
				return leaders, nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("shards of %s without a leader: %w (%v)", queue, ctx.Err(), last)
		case <-time.After(probeWait):
		}
	}
}

// shardRoutesFrom asks the node at addr for queue's routes: the leader of each of its n shards
// (of the queue itself when n is 1), each one of c's nodes.
func shardRoutesFrom(addr, queue string, n int, c *cluster) ([]string, error) {
	conn, err := fibpconn.Dial(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	f, err := conn.Call(&fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: queue}}})
	if err != nil {
		return nil, err
	}
	res, ok := f.(*fibp.GetRoutesResult)
	if !ok || res.ErrorCode != fibp.CodeOk || len(res.Entries) != 1 {
		return nil, fmt.Errorf("GetRoutes answered %T %+v", f, f)
	}
	r := res.Entries[0]
	leaders := make([]string, n)
	if n == 1 {
		leaders[0] = r.LeaderAddr
	} else if len(r.Shards) != n {
		return nil, fmt.Errorf("%s: %d shard routes, not %d", queue, len(r.Shards), n)
	}
	for _, s := range r.Shards {
		if int(s.ShardIndex) < n {
			leaders[s.ShardIndex] = s.LeaderAddr
		}
	}
	for i, a := range leaders {
		if c.index(a) < 0 {
			return nil, fmt.Errorf("%s shard %d: leader %q is none of the cluster's nodes", queue, i, a)
		}
	}
	return leaders, nil
}

// shardsByNode is the shards each leader leads, by its address.
func shardsByNode(leaders []string) map[string][]int {
	out := map[string][]int{}
	for i, a := range leaders {
		out[a] = append(out[a], i)
	}
	return out
}

// describeLeaders says which node leads which shards.
func describeLeaders(leaders []string) string {
	byNode := shardsByNode(leaders)
	parts := make([]string, 0, len(byNode))
	for a, s := range byNode {
		parts = append(parts, fmt.Sprintf("%s leads shards %v", a, s))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// shardsLines renders, when Fila's three figures were measured, 2 and 4 shards against 1.
func shardsLines(figs []figure) []string {
	idx := func(name string) int { return slices.IndexFunc(figs, func(f figure) bool { return f.name == name }) }
	o, t, f := idx(shardsOne), idx(shardsTwo), idx(shardsFour)
	if o < 0 || t < 0 || f < 0 || math.IsNaN(figs[o].fila) || math.IsNaN(figs[t].fila) || math.IsNaN(figs[f].fila) {
		return nil
	}
	return []string{fmt.Sprintf("SHARDS one=%s two=%s four=%s ratio2=%s ratio4=%s unit=msg/s",
		plain(figs[o].fila, "msg/s"), plain(figs[t].fila, "msg/s"), plain(figs[f].fila, "msg/s"),
		plainRatio(ratio(figs[t].fila, figs[o].fila)), plainRatio(ratio(figs[f].fila, figs[o].fila)))}
}
