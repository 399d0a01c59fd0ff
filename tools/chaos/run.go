package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Config is one run: a workload against a cluster while a nemesis breaks it.
type Config struct {
	Cluster    *Cluster // already started
	Nemesis    Nemesis  // nil: no faults
	Duration   time.Duration
	FaultEvery time.Duration // a fault starts within this after the last one healed (default 2s)
	FaultHold  time.Duration // how long a fault lasts at most (default 1s)
	Seed       uint64
	Workload   Workload      // Addrs default to the cluster's, Queue to "chaos"
	Load       Load          // what to drive instead of Workload (a ShardedWorkload), when set
	Visibility time.Duration // the queue's lease (default 2s: the drain waits for leases lost with their consumers)
	DrainFor   time.Duration // bound of the final drain (default 60s; it waits 3 leases and 1 s for a stuck message)
}

// Result is a run's history and its verdict.
type Result struct {
	History []Op
	Report  Report
	Start   time.Time // the wall-clock time of the history's offset 0 (to read the nodes' logs against it)
}

// Run creates the queue, drives the workload for Duration while the nemesis injects faults,
// heals the last fault, drains the queue and checks the history. An error is a run that could
// not be carried out (a node that would not restart, a queue that could not be drained); a
// broken promise is in the Report.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.FaultEvery == 0 {
		cfg.FaultEvery = 2 * time.Second
	}
	if cfg.FaultHold == 0 {
		cfg.FaultHold = time.Second
	}
	if cfg.Visibility == 0 {
		cfg.Visibility = 2 * time.Second
	}
	if cfg.DrainFor == 0 {
		cfg.DrainFor = 60 * time.Second
	}
	w := cfg.Workload
	if len(w.Addrs) == 0 {
		w.Addrs = cfg.Cluster.Addrs()
	}
	if w.Queue == "" {
		w.Queue = "chaos"
	}
	var l Load = w
	if cfg.Load != nil {
		l = cfg.Load
	}
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := l.CreateQueues(setup, cfg.Visibility)
	cancel()
	if err != nil {
		return Result{}, fmt.Errorf("creating the queues: %w", err)
	}
	rec := NewRecorder()
	load, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	nemesisErr := make(chan error, 1)
	if cfg.Nemesis != nil {
		go func() {
			err := Schedule{Nemesis: cfg.Nemesis, Every: cfg.FaultEvery, Hold: cfg.FaultHold, Seed: cfg.Seed}.Run(load, rec)
			if err != nil {
				stop() // a node that does not come back ends the run
			}
			nemesisErr <- err
		}()
	} else {
		nemesisErr <- nil
	}
	loadErr := l.Run(load, rec)
	nErr := <-nemesisErr
	if err := errors.Join(nErr, cfg.Cluster.CheckAlive()); err != nil {
		return Result{History: rec.History(), Start: rec.start}, err
	}
	if loadErr != nil {
		return Result{History: rec.History(), Start: rec.start}, fmt.Errorf("workload: %w", loadErr)
	}
	drain, cancel := context.WithTimeout(ctx, cfg.DrainFor)
	err = l.Drain(drain, rec, 3*cfg.Visibility+time.Second)
	cancel()
	h := rec.History()
	res := Result{History: h, Report: Check(h), Start: rec.start}
	if err != nil {
		return res, fmt.Errorf("final drain: %w", err)
	}
	return res, nil
}
