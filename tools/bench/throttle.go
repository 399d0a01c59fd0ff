package main

import (
	"slices"

	"github.com/filamq/fila/generated/fibp"
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
// rate of one saturated bucket (a backlog behind 200 per 100 ms) against its limit (target:
// ≥ 95%).
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
	// A backlog big enough for the measurement, then no more enqueues: under a flood of
	// enqueues the actor's rounds grow long and a woken bucket waits for the next round, which
	// measures the round length rather than the throttle (see docs/throttles.md).
	sat := lifecycleLoad(1, 0)
	sat.limit = 60_000
	sat.throttles = []fibp.ThrottleDeclaration{{Name: "bench-saturated", Limits: []fibp.ThrottleLimit{{MaxDeliveries: n, WindowMs: windowMs}}}}
	achieved, err := r.lifecycleRate("throttle-saturated", sat)
	if err != nil {
		return err
	}
	report("throttle_saturated_limit", limit, "msg/s")
	report("throttle_saturated_achieved", achieved, "msg/s")
	report("throttle_saturated_vs_limit", 100*achieved/limit, "%")
	return nil
}
