package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// throttleBuckets is the number of keyed buckets of the keyed throttle workload.
const throttleBuckets = 10_000

// throttleRounds is how many times each throughput variant runs.
const throttleRounds = 3

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchThrottle measures what throttles cost: the lifecycle throughput of 4 consumers declaring
// a throttle whose limit is far above the achievable rate — unkeyed, and keyed by a header with
// 10,000 values — against the same load without throttles (target: ≥ 90%); and the delivery
// rate of one saturated bucket (a backlog behind 200 per 100 ms) against its limit, from the
// deliveries' lease times (target: ≥ 95%).
func benchThrottle(r *runner) error {
	l := lifecycleLoad(4, 0)
	l.groups = throttleBuckets // the "group" header: the keyed throttle's key
	never := []fibp.ThrottleLimit{{MaxDeliveries: 1 << 40, WindowMs: 1000}}
	variants := []struct {
		label     string
		throttles []fibp.ThrottleDeclaration
		rates     []float64
	}{
		{label: "unthrottled"},
		{label: "throttle-unkeyed", throttles: []fibp.ThrottleDeclaration{{Name: "bench-unkeyed", Limits: never}}},
		{label: "throttle-10000-buckets", throttles: []fibp.ThrottleDeclaration{{Name: "bench-keyed", Limits: never,
			Key: fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "group"}}}}},
	}
	// The variants take turns, three rounds, and each figure is the median of its three: on a
	// busy machine one run of each is mostly noise.
	for range throttleRounds {
		for i := range variants {
			l.throttles = variants[i].throttles
			rate, err := r.lifecycleRate(variants[i].label, l)
			if err != nil {
				return err
			}
			variants[i].rates = append(variants[i].rates, rate)
		}
	}
	plain, unkeyed, keyed := median(variants[0].rates), median(variants[1].rates), median(variants[2].rates)
	report("lifecycle_1kb_4c_unthrottled", plain, "msg/s")
	report("lifecycle_1kb_4c_throttle_unkeyed", unkeyed, "msg/s")
	report("lifecycle_1kb_4c_throttle_10000buckets", keyed, "msg/s")
	report("throttle_unkeyed_vs_none", 100*unkeyed/plain, "%")
	report("throttle_10000buckets_vs_none", 100*keyed/plain, "%")

	const n, windowMs = 200, 100
	limit := float64(n) * 1000 / windowMs
	achieved, err := r.saturatedRate([]fibp.ThrottleDeclaration{{Name: "bench-saturated",
		Limits: []fibp.ThrottleLimit{{MaxDeliveries: n, WindowMs: windowMs}}}}, int(2*limit*r.o.duration.Seconds())+20_000)
	if err != nil {
		return err
	}
	report("throttle_saturated_limit", limit, "msg/s")
	report("throttle_saturated_achieved", achieved, "msg/s")
	report("throttle_saturated_vs_limit", 100*achieved/limit, "%")
	return nil
}

// saturatedRate enqueues a backlog of backlog messages, then consumes it through throttles with
// one server-managed subscription, acking everything, and returns the delivery rate from the
// deliveries' lease times over the measuring time after a one-second warm-up: the broker's own
// timing, not the client's (acks, credit, scheduling on a busy machine).
func (r *runner) saturatedRate(throttles []fibp.ThrottleDeclaration, backlog int) (float64, error) {
	q, err := r.newQueue("throttle-saturated")
	if err != nil {
		return 0, err
	}
	ct := &counters{}
	stop, err := r.start(load{queue: q, producers: 2, window: 4, batch: 100, payload: 1024, limit: int64(backlog)}, ct)
	if err != nil {
		return 0, err
	}
	for ct.enqueued.Load()+ct.failed.Load() < int64(backlog) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	c, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var mu sync.Mutex
	var leasedAt []int64
	onDelivery := func(d *fibp.Delivery) {
		ack := &fibp.Ack{Items: make([]fibp.AckItem, len(d.Messages))}
		mu.Lock()
		for i, m := range d.Messages {
			leasedAt = append(leasedAt, int64(m.LeasedAt))
			ack.Items[i] = fibp.AckItem{Queue: m.Queue, MessageID: m.MessageID}
		}
		mu.Unlock()
		c.Go(ack, func(fibp.Frame, error) {})
	}
	if _, err := c.ConsumeWith(&fibp.Consume{Queue: q, Throttles: throttles}, onDelivery); err != nil {
		return 0, err
	}
	warmup, d := time.Second, r.o.duration
	time.Sleep(warmup + d + 200*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(leasedAt) == 0 {
		return 0, fmt.Errorf("no deliveries")
	}
	from := slices.Min(leasedAt) + warmup.Milliseconds()
	to := from + d.Milliseconds()
	n := 0
	for _, at := range leasedAt {
		if at >= from && at < to {
			n++
		}
	}
	return float64(n) / d.Seconds(), nil
}
