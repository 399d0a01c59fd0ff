package main

import (
	"github.com/filamq/fila/generated/fibp"
)

// orderingGroups is the number of ordering groups of the ordering workload.
const orderingGroups = 10_000

// benchOrdering compares the lifecycle throughput of a queue grouped by a header with 10,000
// values against the same load on an unordered queue (target: ≥ 80%).
func benchOrdering(r *runner) error {
	l := lifecycleLoad(4, 0)
	l.groups = orderingGroups
	plain, err := r.lifecycleRate("unordered", l)
	if err != nil {
		return err
	}
	q, err := r.newQueueWith("ordered", fibp.CreateQueue{Ordering: fibp.OrderingGrouped,
		OrderingKey: fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "group"}}})
	if err != nil {
		return err
	}
	l.queue = q
	ct := &counters{}
	stop, err := r.start(l, ct)
	if err != nil {
		return err
	}
	ordered := measure("ordered-10000-groups", r.o.duration, ct.acked.Load)
	stop()
	report("lifecycle_1kb_4c_unordered", plain, "msg/s")
	report("lifecycle_1kb_4c_10000groups", ordered, "msg/s")
	report("ordering_10000groups_vs_unordered", 100*ordered/plain, "%")
	return nil
}

// benchDedup compares batched enqueue throughput with an idempotency key on every message (each
// one remembered for the dedup window) against the same load without keys (target: ≥ 85%).
func benchDedup(r *runner) error {
	rate := func(label string, unique bool) (float64, error) {
		q, err := r.newQueue(label)
		if err != nil {
			return 0, err
		}
		ct := &counters{}
		stop, err := r.start(load{queue: q, producers: 4, window: 4, batch: 100, payload: 1024, unique: unique}, ct)
		if err != nil {
			return 0, err
		}
		v := measure(label, r.o.duration, ct.enqueued.Load)
		stop()
		return v, nil
	}
	off, err := rate("dedup-off", false)
	if err != nil {
		return err
	}
	on, err := rate("dedup-on", true)
	if err != nil {
		return err
	}
	report("enqueue_batched_1kb_dedup_off", off, "msg/s")
	report("enqueue_batched_1kb_dedup_on", on, "msg/s")
	report("dedup_on_vs_off", 100*on/off, "%")
	return nil
}
