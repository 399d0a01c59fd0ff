package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// Throttled delivery across nodes (throttling.md, "Cluster"): three queues, each pre-filled far
// beyond what the throttle lets through, a subscriber on each queue's leader declaring one shared
// throttle of throttleN per throttleWindowMs. First the three queues lead on one node (the
// throttle's owner counts every delivery itself), then on three nodes (two of them borrow tokens
// from the owner). Figures: delivered messages per second; the THROTTLE line sets each against
// N/W:
//
//	THROTTLE n=200 window_ms=1000 one_node=0.998 three_nodes=0.991 unit=fraction_of_N/W target=0.90 result=met

const (
	throttleN        = 200
	throttleWindowMs = 1000
	throttleTarget   = 0.9  // a saturated bucket with subscribers on three nodes: at least 90% of N/W
	throttlePrefill  = 4000 // messages per queue: more than N/W delivers over a run
	throttleOneNode  = "cluster_throttle_1node"
	throttleThree    = "cluster_throttle_3nodes"
)

// throttleFigures are the two delivery rates, in msg/s.
func throttleFigures() []figure {
	return append(throughput(throttleOneNode, 1), throughput(throttleThree, 1)...)
}

// filaThrottled measures the saturated throttle with its subscribers on one node, then on three.
func filaThrottled(ctx context.Context, e *env, p *peer) ([]float64, error) {
	if p.cluster == nil {
		return nil, fmt.Errorf("the throttle across nodes needs a cluster")
	}
	one, err := e.throttledRate(ctx, p.cluster, "one", []int{0, 0, 0})
	if err != nil {
		return nil, err
	}
	three, err := e.throttledRate(ctx, p.cluster, "three", []int{0, 1, 2})
	if err != nil {
		return nil, err
	}
	return []float64{one, three}, nil
}

// throttledRate creates a queue per entry of leaders, led by that node of c, fills it, subscribes
// on its leader under the throttle name, and measures the deliveries per second.
func (e *env) throttledRate(ctx context.Context, c *cluster, name string, leaders []int) (float64, error) {
	var delivered atomic.Int64
	th := fibp.ThrottleDeclaration{Name: name, Limits: []fibp.ThrottleLimit{{MaxDeliveries: throttleN, WindowMs: throttleWindowMs}}}
	for i, li := range leaders {
		q := fmt.Sprintf("throttled-%s-%d", name, i)
		n := c.nodes[li]
		if err := createQueue(n.addr, q); err != nil {
			return 0, err
		}
		if err := leadOnNode(ctx, c, q, n); err != nil {
			return 0, err
		}
		if err := prefill(n.addr, q, throttlePrefill); err != nil {
			return 0, err
		}
		conn, err := fibpconn.Dial(n.addr)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		_, err = conn.ConsumeWith(&fibp.Consume{Queue: q, Credit: 1 << 24, Throttles: []fibp.ThrottleDeclaration{th}},
			func(d *fibp.Delivery) { delivered.Add(int64(len(d.Messages))) })
		if err != nil {
			return 0, err
		}
	}
	return e.measureRate(ctx, "fila throttled deliveries ("+name+")", delivered.Load)
}

// leadOnNode moves queue's leadership to n and waits until n leads it.
func leadOnNode(ctx context.Context, c *cluster, queue string, n *node) error {
	id, err := strconv.ParseUint(n.name, 10, 64)
	if err != nil {
		return fmt.Errorf("node %q has no numeric ID: %w", n.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !leads(n.addr, queue) {
		conn, err := fibpconn.Dial(n.addr)
		if err == nil {
			_, _ = conn.Call(&fibp.MoveQueueLeader{Queue: queue, TargetNodeID: id})
			conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s does not lead %s: %w", n.name, queue, ctx.Err())
		case <-time.After(probeWait):
		}
	}
	return nil
}

// prefill enqueues n small messages to queue through addr, in batches.
func prefill(addr, queue string, n int) error {
	conn, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	for sent := 0; sent < n; {
		req := &fibp.Enqueue{}
		for ; sent < n && len(req.Messages) < 250; sent++ {
			req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: queue, Payload: []byte("m")})
		}
		res, err := conn.Call(req)
		if err != nil {
			return err
		}
		for _, r := range res.(*fibp.EnqueueResult).Results {
			if r.ErrorCode != fibp.CodeOk {
				return fmt.Errorf("prefill %s: %v", queue, r.ErrorCode)
			}
		}
	}
	return nil
}

// throttleLines renders, when Fila's figures were measured, each rate against N/W.
func throttleLines(figs []figure) []string {
	o := slices.IndexFunc(figs, func(f figure) bool { return f.name == throttleOneNode })
	t := slices.IndexFunc(figs, func(f figure) bool { return f.name == throttleThree })
	if o < 0 || t < 0 || math.IsNaN(figs[o].fila) || math.IsNaN(figs[t].fila) {
		return nil
	}
	full := float64(throttleN) * 1000 / throttleWindowMs
	one, three := figs[o].fila/full, figs[t].fila/full
	result := "met"
	if three < throttleTarget {
		result = "missed"
	}
	return []string{fmt.Sprintf("THROTTLE n=%d window_ms=%d one_node=%.3f three_nodes=%.3f unit=fraction_of_N/W target=%.2f result=%s",
		throttleN, throttleWindowMs, one, three, throttleTarget, result)}
}
