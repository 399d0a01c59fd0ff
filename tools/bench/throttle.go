package main

import (
	"github.com/filamq/fila/generated/fibp"
)

// throttleBuckets is the number of keyed buckets of the keyed throttle workload.
const throttleBuckets = 10_000

// benchThrottle measures what throttles cost: the lifecycle throughput of 4 consumers declaring
// a throttle whose limit is far above the achievable rate — unkeyed, and keyed by a header with
// 10,000 values — against the same load without throttles (target: ≥ 90%); and the delivery
// rate of one saturated bucket (a backlog behind 200 per 100 ms) against its limit (target:
// ≥ 95%).
func benchThrottle(r *runner) error {
	l := lifecycleLoad(4, 0)
	l.groups = throttleBuckets // the "group" header: the keyed throttle's key
	plain, err := r.lifecycleRate("unthrottled", l)
	if err != nil {
		return err
	}
	never := []fibp.ThrottleLimit{{MaxDeliveries: 1 << 40, WindowMs: 1000}}
	l.throttles = []fibp.ThrottleDeclaration{{Name: "bench-unkeyed", Limits: never}}
	unkeyed, err := r.lifecycleRate("throttle-unkeyed", l)
	if err != nil {
		return err
	}
	l.throttles = []fibp.ThrottleDeclaration{{Name: "bench-keyed", Limits: never,
		Key: fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "group"}}}}
	keyed, err := r.lifecycleRate("throttle-10000-buckets", l)
	if err != nil {
		return err
	}
	report("lifecycle_1kb_4c_unthrottled", plain, "msg/s")
	report("lifecycle_1kb_4c_throttle_unkeyed", unkeyed, "msg/s")
	report("lifecycle_1kb_4c_throttle_10000buckets", keyed, "msg/s")
	report("throttle_unkeyed_vs_none", 100*unkeyed/plain, "%")
	report("throttle_10000buckets_vs_none", 100*keyed/plain, "%")

	const n, windowMs = 200, 100
	limit := float64(n) * 1000 / windowMs
	sat := lifecycleLoad(1, 0)
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
