package main

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// Delivery durability side by side (clustering.md, "Delivery durability"): the cluster lifecycle
// (1 KB, 4 consumers, fsync) on a queue with committed durability, whose leases are committed in
// the queue's Raft log before each delivery, then on one with fast durability, whose leases live
// in the leader's memory only. Fila only: NATS has no such setting.

const (
	durabilityName      = "cluster_durability_1kb_4c"
	durabilityCommitted = "cluster_lifecycle_committed_1kb_4c"
	durabilityFast      = "cluster_lifecycle_fast_1kb_4c"
)

// durabilityFigures are the two throughputs, committed first.
func durabilityFigures() []figure {
	return append(throughput(durabilityCommitted, 1), throughput(durabilityFast, 1)...)
}

// filaDurabilityLifecycle measures the lifecycle with n consumers on a committed queue, then on a
// fast one, in the same cluster.
func filaDurabilityLifecycle(n int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		if p.cluster == nil {
			return nil, fmt.Errorf("the durability comparison needs a cluster")
		}
		var out []float64
		for _, q := range []struct {
			name string
			d    fibp.DeliveryDurability
		}{{"committed", fibp.DeliveryDurabilityCommitted}, {"fast", fibp.DeliveryDurabilityFast}} {
			if err := createDurableQueue(p.addr, q.name, q.d); err != nil {
				return nil, err
			}
			addr, err := e.queueAddr(ctx, p, q.name) // the queue exists: this finds its leader
			if err != nil {
				return nil, err
			}
			if err := checkDurability(addr, q.name, q.d); err != nil {
				return nil, err
			}
			rate, err := e.filaLifecycleOn(ctx, addr, q.name, n)
			if err != nil {
				return nil, fmt.Errorf("%s queue: %w", q.name, err)
			}
			out = append(out, rate)
		}
		return out, nil
	}
}

// createDurableQueue creates a queue with delivery durability d and the server's other defaults.
func createDurableQueue(addr, name string, d fibp.DeliveryDurability) error {
	c, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Call(&fibp.CreateQueue{Name: name, DeliveryDurability: d})
	if err != nil {
		return err
	}
	if code := res.(*fibp.CreateQueueResult).ErrorCode; code != fibp.CodeOk {
		return fmt.Errorf("create queue %s (delivery durability %v): %v", name, d, code)
	}
	return nil
}

// checkDurability makes sure that the queue's leader at addr runs it with durability d (its
// GetStats lists the settings it runs with), so that each figure measures what it says.
func checkDurability(addr, name string, d fibp.DeliveryDurability) error {
	c, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Call(&fibp.GetStats{Queue: name})
	if err != nil {
		return err
	}
	st := res.(*fibp.GetStatsResult)
	if got, want := st.Settings["delivery_durability"], d.String(); st.ErrorCode != fibp.CodeOk || got != want {
		return fmt.Errorf("queue %s's leader runs it with delivery_durability %q (%v), not %q", name, got, st.ErrorCode, want)
	}
	return nil
}

// durabilityLines renders, when Fila's two figures were measured in the run, the fast queue's
// lifecycle against the committed one's:
//
//	DURABILITY committed=9000 fast=12000 ratio=1.333 unit=msg/s
func durabilityLines(figs []figure) []string {
	c := slices.IndexFunc(figs, func(f figure) bool { return f.name == durabilityCommitted })
	f := slices.IndexFunc(figs, func(f figure) bool { return f.name == durabilityFast })
	if c < 0 || f < 0 || math.IsNaN(figs[c].fila) || math.IsNaN(figs[f].fila) {
		return nil
	}
	return []string{fmt.Sprintf("DURABILITY committed=%s fast=%s ratio=%s unit=msg/s", plain(figs[c].fila, "msg/s"),
		plain(figs[f].fila, "msg/s"), plainRatio(ratio(figs[f].fila, figs[c].fila)))}
}
