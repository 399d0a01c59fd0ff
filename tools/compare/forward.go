package main

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// The forwarded publish: the producers connect to a node that does not lead the queue (the
// stream), which hands each batch to the leader over the cluster's own links (Fila's node link;
// NATS's routes), against cluster_publish_1kb_fsync's producers on the leader itself.

// forwardTarget is the forwarded publish's floor against the direct one: forwarding may cost at
// most 30% of the throughput.
const forwardTarget = 0.7

// followerOf returns the client address of a node of c other than the one at leader.
func followerOf(c *cluster, leader string) (string, error) {
	for _, n := range c.nodes {
		if n.addr != leader && n.proc != nil && !n.proc.exited() {
			return n.addr, nil
		}
	}
	return "", fmt.Errorf("no node but the leader (%s) is up", leader)
}

// filaPublishForwarded is filaPublish with the producers on a follower of the queue.
func filaPublishForwarded(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		if p.cluster == nil {
			return nil, fmt.Errorf("a forwarded publish needs a cluster")
		}
		leader, err := e.queueAddr(ctx, p, "bench")
		if err != nil {
			return nil, err
		}
		addr, err := followerOf(p.cluster, leader)
		if err != nil {
			return nil, err
		}
		l := newFilaLoad(addr, "bench", size)
		defer l.stop()
		if err := l.produce(publishProducers); err != nil {
			return nil, err
		}
		rate, err := e.measureRate(ctx, "fila publish through a follower", l.enqueued.Load)
		if err == nil && l.enqueued.Load() == 0 {
			err = fmt.Errorf("no message was accepted (%d failed)", l.failed.Load())
		}
		return []float64{rate}, err
	}
}

// jsPublishForwarded is jsPublish with the producers on a server that does not lead the stream.
func jsPublishForwarded(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		if p.cluster == nil {
			return nil, fmt.Errorf("a forwarded publish needs a cluster")
		}
		l := newJSLoad(e, p, "bench", size)
		defer l.stop()
		if _, err := l.createStream(ctx, "BENCH", jetstream.LimitsPolicy); err != nil {
			return nil, err
		}
		addr, err := followerOf(p.cluster, l.p.addr) // createStream moved the load to the leader
		if err != nil {
			return nil, err
		}
		l.p = &peer{addr: addr, cluster: p.cluster}
		if err := l.produce(publishProducers); err != nil {
			return nil, err
		}
		rate, err := e.measureRate(ctx, "nats publish through a non-leader", l.published.Load)
		if err == nil && l.published.Load() == 0 {
			err = fmt.Errorf("no publish was acknowledged (%d failed)", l.failed.Load())
		}
		return []float64{rate}, err
	}
}

// forwardLines renders, when both were measured in the run, each broker's forwarded publish
// against its direct one:
//
//	FORWARD broker=fila forwarded=7000 direct=9000 ratio=0.778 unit=msg/s target=0.7 result=met
func forwardLines(figs []figure) []string {
	fw := slices.IndexFunc(figs, func(f figure) bool { return f.name == "cluster_forward_publish_1kb_fsync" })
	di := slices.IndexFunc(figs, func(f figure) bool { return f.name == "cluster_publish_1kb_fsync" })
	if fw < 0 || di < 0 {
		return nil
	}
	var out []string
	for _, s := range []struct {
		broker      string
		fwd, direct float64
	}{{"fila", figs[fw].fila, figs[di].fila}, {"nats", figs[fw].nats, figs[di].nats}} {
		if math.IsNaN(s.fwd) || math.IsNaN(s.direct) {
			continue
		}
		r := ratio(s.fwd, s.direct)
		line := fmt.Sprintf("FORWARD broker=%s forwarded=%s direct=%s ratio=%s unit=msg/s", s.broker, plain(s.fwd, "msg/s"),
			plain(s.direct, "msg/s"), plainRatio(r))
		if s.broker == "fila" {
			res := "met"
			if r < forwardTarget {
				res = "missed"
			}
			line += fmt.Sprintf(" target=%.1f result=%s", forwardTarget, res)
		}
		out = append(out, line)
	}
	return out
}
