package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// Weighted fairness across the shards of one queue (docs/sharding.md, "What holds"): a queue of
// fairShards shards on the cluster, five fairness keys k0..k4 of weights 1:2:3:4:5 (given on each
// message), measured as tools/bench's fairness workload measures one queue on one node: first a
// backlog (the same number of 64 B messages per key, each sent to its shard's leader), then the
// first fairTake deliveries — half the backlog, so that every key keeps a backlog throughout
// whatever its share — taken by the Go SDK's ClusterConsumer (one subscription per node that
// leads a shard, merged), each acked. Each key's deliveries are set against weight/15 of them;
// the FAIRNESS line gives each key's shard, deliveries and expected deliveries, and the worst
// relative deviation against the target (2 %):
//
//	FAIRNESS scope=shards shards=4 taken=5000 k0_shard=1 k0=333 k0_want=333.3 ... max_deviation_pct=0.10 target=2 result=met
//
// NATS has no counterpart (n/a).

const (
	fairName     = "cluster_shard_fairness"
	fairShards   = 4
	fairTarget   = 2.0    // % of a key's expected deliveries
	fairBacklog  = 50_000 // messages in all at most (less with a smaller -prefill)
	fairCredit   = 100    // the ClusterConsumer's MaxUnacked (per subscription)
	fairAckers   = 8      // goroutines acking the deliveries
	fairDevUnit  = "%"
	fairKeyUnit  = "msg"
	fairDevName  = "cluster_shard_fairness_max_deviation"
	fairKeyNameF = "cluster_shard_fairness_k%d"
)

// fairWeights are the keys' weights: key ki has fairWeights[i].
var fairWeights = []int{1, 2, 3, 4, 5}

// fairFigures are each key's deliveries, then the worst deviation.
func fairFigures() []figure {
	var out []figure
	for k := range fairWeights {
		out = append(out, figure{name: fmt.Sprintf(fairKeyNameF, k), unit: fairKeyUnit, better: higherBetter})
	}
	return append(out, figure{name: fairDevName, unit: fairDevUnit, better: lowerBetter})
}

// fairKeyShard is the shard key ki's messages go to.
func fairKeyShard(k int) uint32 {
	plan := shard.Plan{Shards: fairShards}
	return plan.Of(&shard.Message{FairnessKey: fmt.Sprint("k", k)})
}

// filaShardFairness measures the keys' deliveries out of a backlog of a fairShards-shard queue.
func filaShardFairness(ctx context.Context, e *env, p *peer) ([]float64, error) {
	c := p.cluster
	if c == nil || c.nodes[0].http == "" {
		return nil, fmt.Errorf("fairness across shards needs a cluster serving the admin HTTP API")
	}
	const queue = "fair"
	if err := createShardedQueue(ctx, c, queue, fairShards, ""); err != nil {
		return nil, err
	}
	leaders, err := shardLeaders(ctx, c, queue, fairShards)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "   fila: %s: %s\n", queue, describeLeaders(leaders))
	per := min(e.o.prefill, fairBacklog) / int64(len(fairWeights))
	per -= per % batchSize
	var wg sync.WaitGroup
	errs := make([]error, len(fairWeights))
	for k, w := range fairWeights {
		wg.Go(func() { errs[k] = fairBacklogOf(ctx, leaders[fairKeyShard(k)], queue, k, w, int(per)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	take := per * int64(len(fairWeights)) / 2
	take -= take % 15
	counts, err := fairConsume(ctx, c, queue, take)
	if err != nil {
		return nil, err
	}
	out := make([]float64, 0, len(fairWeights)+1)
	worst := 0.0
	for k, w := range fairWeights {
		want := float64(take) * float64(w) / 15
		dev := 100 * math.Abs(float64(counts[k])-want) / want
		fmt.Fprintf(os.Stderr, "   fila: key k%d (weight %d, shard %d): %d deliveries, expected %.1f (%.2f%% off)\n",
			k, w, fairKeyShard(k), counts[k], want, dev)
		if counts[k] >= per {
			fmt.Fprintf(os.Stderr, "   fila: key k%d's backlog of %d ran out before the %d deliveries were taken: its share was capped\n", k, per, take)
		}
		worst = max(worst, dev)
		out = append(out, float64(counts[k]))
	}
	return append(out, worst), nil
}

// fairBacklogOf enqueues n messages of key k (weight w) to queue through addr, the leader of the
// key's shard, in frames of batchSize, each answered before the next. Messages refused while the
// shard's group settles after its creation (NodeNotReady, NotLeader) are sent again, so that the
// key's backlog is exactly n.
func fairBacklogOf(ctx context.Context, addr, queue string, k, w, n int) error {
	conn, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	msg := fibp.EnqueueMessage{Queue: queue, Payload: make([]byte, 64),
		FairnessKey: wire.Some(fmt.Sprint("k", k)), Weight: wire.Some(uint32(w))}
	for tries, left := 0, n; left > 0; {
		req := &fibp.Enqueue{Messages: make([]fibp.EnqueueMessage, min(left, batchSize))}
		for i := range req.Messages {
			req.Messages[i] = msg
		}
		f, err := conn.Call(req)
		if err != nil {
			return fmt.Errorf("backlog of k%d on %s: %w", k, addr, err)
		}
		refused := fibp.CodeOk
		for _, r := range f.(*fibp.EnqueueResult).Results {
			switch r.ErrorCode {
			case fibp.CodeOk:
				left--
			case fibp.CodeNodeNotReady, fibp.CodeNotLeader:
				refused = r.ErrorCode
			default:
				return fmt.Errorf("backlog of k%d on %s: %v", k, addr, r.ErrorCode)
			}
		}
		if refused == fibp.CodeOk {
			continue
		}
		if tries++; tries > 500 {
			return fmt.Errorf("backlog of k%d on %s: still %v after %d tries", k, addr, refused, tries)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeWait):
		}
	}
	return nil
}

// fairConsume takes the first take deliveries of queue through a ClusterConsumer and counts them
// by key (k0..k4); every delivery is acked.
func fairConsume(ctx context.Context, c *cluster, queue string, take int64) ([]int64, error) {
	seeds := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		seeds[i] = n.addr
	}
	cl, err := fila.DialCluster(ctx, seeds, nil)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	sub, err := cl.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: fairCredit})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	acks := make(chan *fila.Delivery, fairCredit)
	var wg sync.WaitGroup
	defer func() { close(acks); wg.Wait() }()
	for range fairAckers {
		wg.Go(func() {
			for d := range acks {
				_ = d.Ack(ctx)
			}
		})
	}
	counts := make([]int64, len(fairWeights))
	b := bar(take, "fila deliveries across shards")
	defer b.Finish()
	for got := int64(0); got < take; got++ {
		var d *fila.Delivery
		var ok bool
		select {
		case d, ok = <-sub.C():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !ok {
			return nil, fmt.Errorf("the subscription ended after %d deliveries: %v", got, sub.Err())
		}
		var k int
		if _, err := fmt.Sscanf(d.FairnessKey, "k%d", &k); err != nil || k < 0 || k >= len(counts) {
			return nil, fmt.Errorf("a delivery of fairness key %q", d.FairnessKey)
		}
		counts[k]++
		acks <- d
		b.Add(1)
	}
	return counts, nil
}

// fairLines renders, when Fila's figures were measured, each key's shard and deliveries against
// weight/15 of them, and the worst deviation against the target.
func fairLines(figs []figure) []string {
	dev := slices.IndexFunc(figs, func(f figure) bool { return f.name == fairDevName })
	if dev < len(fairWeights) || math.IsNaN(figs[dev].fila) {
		return nil
	}
	keys := figs[dev-len(fairWeights) : dev]
	var taken float64
	for _, f := range keys {
		taken += f.fila
	}
	parts := []string{"FAIRNESS scope=shards", fmt.Sprintf("shards=%d", fairShards), fmt.Sprintf("taken=%.0f", taken)}
	for k, f := range keys {
		parts = append(parts, fmt.Sprintf("k%d_weight=%d k%d_shard=%d k%d=%.0f k%d_want=%.1f", k, fairWeights[k], k,
			fairKeyShard(k), k, f.fila, k, taken*float64(fairWeights[k])/15))
	}
	res := "met"
	if figs[dev].fila > fairTarget {
		res = "missed"
	}
	parts = append(parts, fmt.Sprintf("max_deviation_pct=%.2f target=%g result=%s", figs[dev].fila, fairTarget, res))
	return []string{strings.Join(parts, " ")}
}
