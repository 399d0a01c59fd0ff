package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/filamq/fila/client/fila"
)

// The SDK's publish in a cluster: fila.DialCluster seeded with a node that does not lead the
// queue, whose first answer's route hint sends every later Enqueue straight to the leader, against
// cluster_publish_1kb_fsync's producers on the leader itself. NATS's side is its publish through a
// server that does not lead the stream (its client has no hints: the servers route it).

// hintsTarget is the SDK's publish through hints against the direct one: within 5%.
const hintsTarget = 0.95

// filaPublishSDKHints measures accepted messages per second from publishProducers*batchWindow
// concurrent Cluster.Enqueue calls of batchSize messages over publishProducers Clusters, each
// seeded with a follower.
func filaPublishSDKHints(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		if p.cluster == nil {
			return nil, fmt.Errorf("the SDK's publish through hints needs a cluster")
		}
		leader, err := e.queueAddr(ctx, p, "bench")
		if err != nil {
			return nil, err
		}
		seed, err := followerOf(p.cluster, leader)
		if err != nil {
			return nil, err
		}
		// As many clients as the direct publish has connections (publishProducers), each with
		// batchWindow calls in flight: the same connections to the leader once hints route them.
		clusters := make([]*fila.Cluster, publishProducers)
		for i := range clusters {
			if clusters[i], err = fila.DialCluster(ctx, []string{seed}, nil); err != nil {
				return nil, err
			}
			defer clusters[i].Close()
		}
		c := clusters[0]
		msgs := make([]fila.Message, batchSize)
		payload := make([]byte, size)
		for i := range msgs {
			msgs[i] = fila.Message{Queue: "bench", Payload: payload}
		}
		var enqueued, failed atomic.Int64
		load, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for k := range publishProducers * batchWindow {
			c := clusters[k%publishProducers]
			wg.Go(func() {
				for load.Err() == nil {
					res, err := c.Enqueue(load, msgs...)
					if err != nil {
						failed.Add(int64(len(msgs)))
						continue
					}
					for _, r := range res {
						if r.Err == nil {
							enqueued.Add(1)
						} else {
							failed.Add(1)
						}
					}
				}
			})
		}
		rate, err := e.measureRate(ctx, "fila publish through the SDK's route hints", enqueued.Load)
		stop()
		wg.Wait()
		if err == nil && enqueued.Load() == 0 {
			err = fmt.Errorf("no message was accepted (%d failed)", failed.Load())
		}
		if route, _ := c.Route("bench"); err == nil && route != leader {
			err = fmt.Errorf("the SDK's route to bench is %q, not the leader %s", route, leader)
		}
		return []float64{rate}, err
	}
}

// hintsLines renders, when both were measured in the run, Fila's publish through the SDK's route
// hints against its direct one:
//
//	HINTS broker=fila sdk=8800 direct=9000 ratio=0.978 unit=msg/s target=0.95 result=met
func hintsLines(figs []figure) []string {
	h := slices.IndexFunc(figs, func(f figure) bool { return f.name == "cluster_sdk_publish_1kb_fsync" })
	di := slices.IndexFunc(figs, func(f figure) bool { return f.name == "cluster_publish_1kb_fsync" })
	if h < 0 || di < 0 || math.IsNaN(figs[h].fila) || math.IsNaN(figs[di].fila) {
		return nil
	}
	r := ratio(figs[h].fila, figs[di].fila)
	res := "met"
	if r < hintsTarget {
		res = "missed"
	}
	return []string{fmt.Sprintf("HINTS broker=fila sdk=%s direct=%s ratio=%s unit=msg/s target=%.2f result=%s",
		plain(figs[h].fila, "msg/s"), plain(figs[di].fila, "msg/s"), plainRatio(r), hintsTarget, res)}
}
