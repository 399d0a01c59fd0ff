package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/client/fila"
)

// The lifecycle through a rolling restart: the SDK's producers and consumers (fila.DialCluster,
// which follow leaders as they move) run the lifecycle (1 KB, fsync, committed leases) on a
// three-node cluster, and a probe times round trips (enqueue, delivery, ack, one message at a
// time) on a queue of its own beside them; the acknowledged rate and the probe's p99 are measured
// over a quiet stretch, then over a rolling restart of all three nodes as docs/cluster.md
// describes it (DrainNode, SIGTERM, start again, undrain), and set against each other:
//
//	ROLLING quiet=9000 during=8000 ratio=0.889 p99_quiet_ms=4.1 p99_during_ms=35.0 restart_s=12.3
//
// NATS has no counterpart here (n/a).

const rollingName = "cluster_rolling_restart_1kb"

// rollingProducers and rollingConsumers are the SDK clients of the load; rollingBatch the
// messages per Enqueue call.
const (
	rollingProducers = 2
	rollingConsumers = 2
	rollingBatch     = 50
	rollingAcks      = 64 // acks in flight per consumer
)

func rollingFigures() []figure {
	return []figure{
		{name: "cluster_rolling_quiet", unit: "msg/s", better: higherBetter},
		{name: "cluster_rolling_during", unit: "msg/s", better: higherBetter},
		{name: "cluster_rolling_p99_quiet", unit: "ms", better: lowerBetter},
		{name: "cluster_rolling_p99_during", unit: "ms", better: lowerBetter},
		{name: "cluster_rolling_took", unit: "s", better: lowerBetter},
	}
}

// rollingLoad is what the load measured: acked counts the acknowledged messages, ages the probe's
// round trips since the last sample.
type rollingLoad struct {
	acked atomic.Int64
	mu    sync.Mutex
	ages  []time.Duration
}

func (l *rollingLoad) sample() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.ages
	l.ages = nil
	return s
}

// filaRolling measures the load quiet, then through the rolling restart.
func filaRolling(ctx context.Context, e *env, p *peer) ([]float64, error) {
	c := p.cluster
	if c == nil {
		return nil, fmt.Errorf("a rolling restart needs a cluster")
	}
	const queue, probeQueue = "rolling", "rolling-probe"
	for _, q := range []string{queue, probeQueue} {
		if _, err := e.queueAddr(ctx, p, q); err != nil {
			return nil, err
		}
	}
	seeds := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		seeds[i] = n.addr
	}
	load, stop := context.WithCancel(ctx)
	var l rollingLoad
	var wg sync.WaitGroup
	var clients []*fila.Cluster
	defer func() { // the load ends before its clients close
		stop()
		wg.Wait()
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for i := range rollingProducers + rollingConsumers + 1 {
		cl, err := fila.DialCluster(ctx, seeds, nil)
		if err != nil {
			return nil, err
		}
		clients = append(clients, cl)
		switch {
		case i < rollingProducers:
			wg.Go(func() { rollingProduce(load, cl, queue) })
		case i < rollingProducers+rollingConsumers:
			sub, err := cl.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: 256})
			if err != nil {
				return nil, err
			}
			wg.Go(func() { rollingConsume(load, sub, &l) })
		default:
			sub, err := cl.Consume(ctx, probeQueue, fila.ConsumeOptions{MaxUnacked: 1})
			if err != nil {
				return nil, err
			}
			wg.Go(func() { rollingProbe(load, cl, sub, &l) })
		}
	}
	quiet, err := e.measureRate(ctx, "fila lifecycle, quiet cluster", l.acked.Load)
	if err != nil {
		return nil, err
	}
	p99Quiet := percentile(sorted(l.sample()), 99)
	start, a0 := time.Now(), l.acked.Load()
	for _, n := range c.nodes {
		if err := rollNode(ctx, c, n); err != nil {
			return nil, err
		}
	}
	took := time.Since(start)
	during := float64(l.acked.Load()-a0) / took.Seconds()
	p99During := percentile(sorted(l.sample()), 99)
	fmt.Fprintf(os.Stderr, "   fila: rolling restart of %d nodes in %v: %.0f msg/s (quiet %.0f), round trip p99 %v (quiet %v)\n",
		len(c.nodes), took.Round(time.Millisecond), during, quiet, p99During.Round(time.Microsecond), p99Quiet.Round(time.Microsecond))
	return []float64{quiet, during, ms(p99Quiet), ms(p99During), took.Seconds()}, nil
}

// rollNode drains n (through another node), stops it with SIGTERM, starts it again and undrains
// it.
func rollNode(ctx context.Context, c *cluster, n *node) error {
	id := uint64(c.index(n.addr) + 1) // startFilaCluster numbers the nodes 1, 2, 3 in order
	other := c.nodes[(c.index(n.addr)+1)%len(c.nodes)]
	admin, err := fila.Dial(ctx, other.addr, nil)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.DrainNode(ctx, id, true); err != nil {
		return fmt.Errorf("draining node %d: %w", id, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := admin.GetClusterStatus(ctx)
		if err == nil && st.MetaLeaderNodeID != id && leadsNone(st, id) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d still leads a minute into its drain (%v)", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.proc.stop()
	if err := c.start(ctx, n); err != nil {
		return fmt.Errorf("starting node %d again: %w", id, err)
	}
	return admin.DrainNode(ctx, id, false)
}

func leadsNone(st *fila.ClusterStatus, id uint64) bool {
	for _, ns := range st.Nodes {
		if ns.NodeID == id {
			return ns.QueueLeaderships == 0
		}
	}
	return false
}

// rollingProduce enqueues batches until ctx ends; a failed call (the SDK has retried it within
// its failover timeout) is dropped.
func rollingProduce(ctx context.Context, cl *fila.Cluster, queue string) {
	msgs := make([]fila.Message, rollingBatch)
	payload := make([]byte, 1024)
	for i := range msgs {
		msgs[i] = fila.Message{Queue: queue, Payload: payload}
	}
	for ctx.Err() == nil {
		_, _ = cl.Enqueue(ctx, msgs...)
	}
}

// rollingConsume acknowledges every delivery, rollingAcks at once.
func rollingConsume(ctx context.Context, sub *fila.ClusterConsumer, l *rollingLoad) {
	defer sub.Close()
	sem := make(chan struct{}, rollingAcks)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		d, err := sub.Next(ctx)
		if err != nil {
			return
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if d.Ack(ctx) == nil {
				l.acked.Add(1)
			}
		})
	}
}

// rollingProbe times round trips on its own queue beside the load, one message at a time: the
// enqueue, then its delivery and ack.
func rollingProbe(ctx context.Context, cl *fila.Cluster, sub *fila.ClusterConsumer, l *rollingLoad) {
	defer sub.Close()
	payload := make([]byte, 1024)
	for ctx.Err() == nil {
		start := time.Now()
		binary.BigEndian.PutUint64(payload, uint64(start.UnixNano()))
		if res, err := cl.Enqueue(ctx, fila.Message{Queue: sub.Queue(), Payload: payload}); err != nil || res[0].Err != nil {
			continue
		}
		for {
			d, err := sub.Next(ctx)
			if err != nil {
				return
			}
			_ = d.Ack(ctx)
			if len(d.Payload) >= 8 && int64(binary.BigEndian.Uint64(d.Payload)) == start.UnixNano() {
				break // an older probe's redelivery is acked and passed over
			}
		}
		l.mu.Lock()
		l.ages = append(l.ages, time.Since(start))
		l.mu.Unlock()
	}
}

func sorted(ds []time.Duration) []time.Duration {
	slices.Sort(ds)
	return ds
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// rollingLines renders the ROLLING line when the workload ran.
func rollingLines(figs []figure) []string {
	i := slices.IndexFunc(figs, func(f figure) bool { return f.name == "cluster_rolling_quiet" })
	if i < 0 || i+4 >= len(figs) || math.IsNaN(figs[i].fila) {
		return nil
	}
	q, d, pq, pd, took := figs[i].fila, figs[i+1].fila, figs[i+2].fila, figs[i+3].fila, figs[i+4].fila
	return []string{fmt.Sprintf("ROLLING quiet=%s during=%s ratio=%s p99_quiet_ms=%.1f p99_during_ms=%.1f restart_s=%.1f",
		plain(q, "msg/s"), plain(d, "msg/s"), plainRatio(ratio(d, q)), pq, pd, took)}
}
