package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// benchRestartKeys measures what a restart costs a queue holding many fairness keys: it fills one
// queue with -restart-keys messages, each under a fairness key of its own, stops the server cleanly
// (SIGTERM), starts it again and measures how long until the queue answers GetStats with every
// message and key back and until a consumer receives a message; then the same after SIGKILL. It
// prints the figures and one summary line per stop:
//
//	RESTARTKEYS stop=term keys=1000000 ready_s=… stats_s=… deliver_s=… cpu_s=… rss_mib=…
//
// ready_s is from the launch until the server accepts connections, stats_s until GetStats reports
// every message, deliver_s until the first delivery (each from the launch); cpu_s is the new
// process's CPU time by then.
func benchRestartKeys(r *runner) error {
	if r.srv.cmd == nil {
		fmt.Fprintln(os.Stderr, "   skipped: the server was not started by this tool")
		return nil
	}
	total := r.o.restartKeys
	n := total // messages stored: each restart's delivery is acked
	q, err := r.newQueue("restart-keys")
	if err != nil {
		return err
	}
	if err := fillDistinctKeys(r.srv.addr, q, n); err != nil {
		return err
	}
	if err := awaitDepth(r.srv.addr, q, n, time.Minute); err != nil {
		return err
	}
	for _, stop := range []string{"term", "kill"} {
		stopped := time.Now()
		if stop == "term" {
			r.srv.terminate()
		} else {
			r.srv.cmd.Process.Kill()
			r.srv.cmd.Wait()
		}
		fmt.Fprintf(os.Stderr, "   stopped (%s) in %v\n", stop, time.Since(stopped).Round(time.Millisecond))
		launched := time.Now()
		if err := r.srv.launch(); err != nil {
			return err
		}
		ready := time.Since(launched)
		if err := awaitDepth(r.srv.addr, q, n, 10*time.Minute); err != nil {
			return err
		}
		stats := time.Since(launched)
		if err := awaitDelivery(r.srv.addr, q); err != nil {
			return err
		}
		deliver := time.Since(launched)
		n-- // the delivered message was acked
		cpu, rss := r.srv.cpuSeconds(), mib(r.srv.rssBytes())
		tag := fmt.Sprintf("%s_%d_keys", stop, total)
		report("restart_stats_"+tag, stats.Seconds(), "s")
		report("restart_deliver_"+tag, deliver.Seconds(), "s")
		report("restart_cpu_"+tag, cpu, "s")
		fmt.Printf("RESTARTKEYS stop=%s keys=%d ready_s=%.2f stats_s=%.2f deliver_s=%.2f cpu_s=%.2f rss_mib=%.0f\n",
			stop, total, ready.Seconds(), stats.Seconds(), deliver.Seconds(), cpu, rss)
	}
	return nil
}

// fillDistinctKeys enqueues n small messages into q over 4 connections, message i under fairness
// key "k<i>", so that every message has a key of its own.
func fillDistinctKeys(addr, q string, n int) error {
	const producers, batch, window = 4, 500, 4
	var next, done, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for range producers {
		c, err := fibpconn.Dial(addr)
		if err != nil {
			return err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := make(chan struct{}, window)
			for {
				from := next.Add(batch) - batch
				if from >= int64(n) {
					break
				}
				req := &fibp.Enqueue{}
				for i := from; i < min(from+batch, int64(n)); i++ {
					req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: q, Payload: []byte("restart"),
						FairnessKey: wire.Some(fmt.Sprintf("k%d", i))})
				}
				sem <- struct{}{}
				c.Go(req, func(f fibp.Frame, err error) {
					defer func() { <-sem }()
					res, ok := f.(*fibp.EnqueueResult)
					if err != nil || !ok {
						errs <- fmt.Errorf("enqueue: %v", err)
						return
					}
					for _, r := range res.Results {
						if r.ErrorCode != fibp.CodeOk {
							failed.Add(1)
						}
					}
					if d := done.Add(int64(len(res.Results))); d%50_000 < batch {
						fmt.Fprintf(os.Stderr, "\r   filling %s: %d / %d (%.0f msg/s)", q, d, n, float64(d)/time.Since(start).Seconds())
					}
				})
			}
			for range window {
				sem <- struct{}{}
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "\r   filled %s with %d messages under as many keys in %v%20s\n", q, n, time.Since(start).Round(time.Second), "")
	select {
	case err := <-errs:
		return err
	default:
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d enqueues refused", f)
	}
	return nil
}

// awaitDepth polls GetStats until q reports n stored messages under n active fairness keys.
func awaitDepth(addr, q string, n int, limit time.Duration) error {
	c, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(limit)
	var last *fibp.GetStatsResult
	for time.Now().Before(deadline) {
		res, err := c.Call(&fibp.GetStats{Queue: q})
		if err != nil {
			return err
		}
		if last = res.(*fibp.GetStatsResult); last.ErrorCode == fibp.CodeOk && last.Depth == uint64(n) && last.ActiveFairnessKeys == uint64(n) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%s: after %v GetStats says %+v, want %d messages and keys", q, limit, last, n)
}

// awaitDelivery subscribes to q with a credit of one, waits for a delivery and acks it.
func awaitDelivery(addr, q string) error {
	c, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	got := make(chan wire.UUID, 1)
	if _, err := c.Consume(q, 1, func(d *fibp.Delivery) {
		select {
		case got <- d.Messages[0].MessageID:
		default:
		}
	}); err != nil {
		return err
	}
	select {
	case id := <-got:
		res, err := c.Call(&fibp.Ack{Items: []fibp.AckItem{{Queue: q, MessageID: id}}})
		if err != nil {
			return err
		}
		if code := res.(*fibp.AckResult).Results[0].ErrorCode; code != fibp.CodeOk {
			return fmt.Errorf("ack: %v", code)
		}
		return nil
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("%s: no delivery within 5 minutes of the restart", q)
	}
}
