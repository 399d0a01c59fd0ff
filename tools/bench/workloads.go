package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

type workload struct {
	name, doc string
	run       func(r *runner) error
}

var workloads = []workload{
	{"enqueue", "batched durable enqueue, 100 x 1 KB per frame, 4 producers", benchEnqueue},
	{"lifecycle", "enqueue -> consume -> ack, 1 KB, 1 and 4 consumers", benchLifecycle},
	{"latency", "end-to-end latency at light load, one 1 KB message at a time", benchLatency},
	{"keys", "lifecycle throughput with 1, 10, 1,000 and 10,000 fairness keys; DRR overhead", benchKeys},
	{"fairness", "delivery shares with weights 1:2:3:4:5 over a backlog", benchFairness},
	{"ordering", "lifecycle throughput with 10,000 ordering groups vs an unordered queue", benchOrdering},
	{"throttle", "lifecycle throughput with a throttle that never binds (one bucket, 10,000 buckets) vs none; a saturated bucket's rate vs its limit", benchThrottle},
	{"dedup", "batched enqueue with deduplication on (an idempotency key per message) vs off", benchDedup},
	{"lua", "batched enqueue with an on_enqueue hook vs none (overhead per message); RSS of 1,000 idle queues with hooks", benchLua},
	{"memory", "server RSS idle and with a backlog of 1 KB messages", benchMemory},
	{"backlog", "RSS, bytes per message and lifecycle throughput with a standing backlog (-backlog-sizes) vs an empty queue", benchBacklog},
	{"queues", "idle queues: creation rate, RSS and idle CPU, restart time", benchQueues},
	{"restart_keys", "restart (SIGTERM, then SIGKILL) of a queue holding -restart-keys messages under as many fairness keys: time until GetStats and a delivery", benchRestartKeys},
}

func benchEnqueue(r *runner) error {
	q, err := r.newQueue("enqueue")
	if err != nil {
		return err
	}
	ct := &counters{}
	stop, err := r.start(load{queue: q, producers: 4, window: 4, batch: 100, payload: 1024}, ct)
	if err != nil {
		return err
	}
	rate := measure("enqueue", r.o.duration, ct.enqueued.Load)
	stop()
	report("enqueue_batched_1kb", rate, "msg/s")
	return nil
}

// lifecycleRate measures acked messages per second for a load with consumers.
func (r *runner) lifecycleRate(label string, l load) (float64, error) {
	q, err := r.newQueue(label)
	if err != nil {
		return 0, err
	}
	l.queue = q
	ct := &counters{}
	stop, err := r.start(l, ct)
	if err != nil {
		return 0, err
	}
	rate := measure(label, r.o.duration, ct.acked.Load)
	stop()
	return rate, nil
}

func lifecycleLoad(consumers, keys int) load {
	return load{producers: 2, window: 4, batch: 100, payload: 1024, consumers: consumers, credit: 2000, keys: keys}
}

func benchLifecycle(r *runner) error {
	for _, n := range []int{1, 4} {
		rate, err := r.lifecycleRate(fmt.Sprintf("lifecycle-%dc", n), lifecycleLoad(n, 0))
		if err != nil {
			return err
		}
		report(fmt.Sprintf("lifecycle_1kb_%dc", n), rate, "msg/s")
	}
	return nil
}

func benchLatency(r *runner) error {
	q, err := r.newQueue("latency")
	if err != nil {
		return err
	}
	prod, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return err
	}
	defer prod.Close()
	cons, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return err
	}
	defer cons.Close()
	arrived := make(chan time.Time, 1)
	var sub uint32
	ready := make(chan struct{})
	sub, err = cons.Consume(q, 1, func(d *fibp.Delivery) {
		<-ready
		at := time.Now()
		ack := &fibp.Ack{Items: []fibp.AckItem{{Queue: q, MessageID: d.Messages[0].MessageID}}}
		cons.Go(ack, func(fibp.Frame, error) {})
		cons.Credit(sub, 1)
		arrived <- at
	})
	close(ready)
	if err != nil {
		return err
	}
	payload := make([]byte, 1024)
	n := int(r.o.duration / (2 * time.Millisecond))
	n = max(200, min(n, 5000))
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := prod.Call(&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: q, Payload: payload}}}); err != nil {
			return err
		}
		select {
		case at := <-arrived:
			lat = append(lat, at.Sub(start))
		case <-time.After(10 * time.Second):
			return fmt.Errorf("a message was not delivered within 10 s")
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	fmt.Fprintf(os.Stderr, "   %d messages\n", len(lat))
	report("latency_p50_1kb", pct(0.50), "us")
	report("latency_p99_1kb", pct(0.99), "us")
	return nil
}

func benchKeys(r *runner) error {
	rates := map[int]float64{}
	for _, keys := range []int{1, 10, 1000, 10000} {
		rate, err := r.lifecycleRate(fmt.Sprintf("keys-%d", keys), lifecycleLoad(4, keys))
		if err != nil {
			return err
		}
		rates[keys] = rate
		report(fmt.Sprintf("lifecycle_1kb_4c_%dkeys", keys), rate, "msg/s")
	}
	report("drr_overhead_10keys_vs_1key", 100*(1-rates[10]/rates[1]), "%")
	report("keys_10000_vs_10", 100*rates[10000]/rates[10], "%")
	return nil
}

// benchFairness fills five keys with weights 1..5, then lets one consumer take a fixed number of
// deliveries and compares each key's share with weight/15.
func benchFairness(r *runner) error {
	q, err := r.newQueue("fairness")
	if err != nil {
		return err
	}
	weights := []int{1, 2, 3, 4, 5}
	backlog := int64(min(r.o.backlog, 100_000))
	backlog -= backlog % 500
	ct := &counters{}
	stop, err := r.start(load{queue: q, producers: 1, window: 4, batch: 100, payload: 64, keys: 5, weights: weights, limit: backlog}, ct)
	if err != nil {
		return err
	}
	for ct.enqueued.Load()+ct.failed.Load() < backlog {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	take := backlog / 2 // every key keeps a backlog throughout
	take -= take % 15
	cons, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return err
	}
	defer cons.Close()
	counts := make([]atomic.Int64, 5)
	var got atomic.Int64
	done := make(chan struct{})
	var sub uint32
	ready := make(chan struct{})
	sub, err = cons.Consume(q, 100, func(d *fibp.Delivery) {
		<-ready
		ack := &fibp.Ack{}
		for _, m := range d.Messages {
			var k int
			fmt.Sscanf(m.FairnessKey, "k%d", &k)
			if n := got.Add(1); n <= take {
				counts[k].Add(1)
				if n == take {
					close(done)
				}
			}
			ack.Items = append(ack.Items, fibp.AckItem{Queue: q, MessageID: m.MessageID})
		}
		cons.Go(ack, func(fibp.Frame, error) {})
		cons.Credit(sub, uint32(len(d.Messages)))
	})
	close(ready)
	if err != nil {
		return err
	}
	<-done
	worst := 0.0
	for k, w := range weights {
		want := float64(take) * float64(w) / 15
		dev := 100 * math.Abs(float64(counts[k].Load())-want) / want
		fmt.Fprintf(os.Stderr, "   key k%d weight %d: %d deliveries, expected %.0f (%.2f%% off)\n", k, w, counts[k].Load(), want, dev)
		worst = max(worst, dev)
	}
	report("fairness_max_deviation_weights_1to5", worst, "%")
	return nil
}

func benchMemory(r *runner) error {
	if r.srv.cmd == nil {
		fmt.Fprintln(os.Stderr, "   skipped: the server was not started by this tool")
		return nil
	}
	report("rss_idle", float64(r.idleRSS)/(1<<20), "MiB")
	q, err := r.newQueue("backlog")
	if err != nil {
		return err
	}
	ct := &counters{}
	n := int64(r.o.backlog)
	stop, err := r.start(load{queue: q, producers: 4, window: 4, batch: 500, payload: 1024, limit: n}, ct)
	if err != nil {
		return err
	}
	start := time.Now()
	for ct.enqueued.Load()+ct.failed.Load() < n {
		time.Sleep(200 * time.Millisecond)
		fmt.Fprintf(os.Stderr, "\r   backlog %d / %d (%.0f msg/s)", ct.enqueued.Load(), n, float64(ct.enqueued.Load())/time.Since(start).Seconds())
	}
	fmt.Fprintln(os.Stderr)
	stop()
	report(fmt.Sprintf("rss_backlog_%d_1kb", n), float64(r.srv.rssBytes())/(1<<20), "MiB")
	return nil
}
