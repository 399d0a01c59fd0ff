package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
)

// ThrottleDeclarations converts a Consume's throttle declarations (the broker validates them).
func ThrottleDeclarations(ds []fibp.ThrottleDeclaration) []service.ThrottleDeclaration {
	if len(ds) == 0 {
		return nil
	}
	out := make([]service.ThrottleDeclaration, len(ds))
	for i, d := range ds {
		out[i] = service.ThrottleDeclaration{Name: d.Name, Key: Key(d.Key), WhenKeyMissing: throttlePolicy(d.WhenKeyMissing)}
		out[i].Limits = make([]service.ThrottleLimit, len(d.Limits))
		for j, l := range d.Limits {
			out[i].Limits[j] = service.ThrottleLimit{Max: l.MaxDeliveries, WindowMs: l.WindowMs}
		}
	}
	return out
}

// Key converts a wire key; the kinds are the wire's values.
func Key(k fibp.Key) keys.Key {
	if len(k) == 0 {
		return nil
	}
	out := make(keys.Key, len(k))
	for i, p := range k {
		out[i] = keys.Part{Kind: keys.Kind(p.Kind), Name: p.Name}
	}
	return out
}

// WireKey converts a key to the wire's.
func WireKey(k keys.Key) fibp.Key {
	out := make(fibp.Key, len(k))
	for i, p := range k {
		out[i] = fibp.KeyPart{Kind: fibp.KeyPartKind(p.Kind), Name: p.Name}
	}
	return out
}

// ThrottleSummary is the throttle_summary of s.
func ThrottleSummary(s *service.ThrottleSummary) fibp.ThrottleSummary {
	ts := fibp.ThrottleSummary{Name: s.Name, Key: WireKey(s.Key), WhenKeyMissing: wireThrottlePolicy(s.WhenKeyMissing),
		DeclaringSubscribers: uint32(s.Subscribers), Limits: make([]fibp.ThrottleLimit, len(s.Limits))}
	for i, l := range s.Limits {
		ts.Limits[i] = fibp.ThrottleLimit{MaxDeliveries: l.Max, WindowMs: l.WindowMs}
	}
	return ts
}

// BucketStats is the bucket_stats of b.
func BucketStats(b *service.ThrottleBucket) fibp.BucketStats {
	bs := fibp.BucketStats{BucketKind: fibp.BucketKindKeyed, Values: b.Values, Counted: b.Counted, Waiting: b.Waiting,
		NextRoomAt: uint64(b.NextRoomAt)}
	if b.Missing {
		bs.BucketKind, bs.Values = fibp.BucketKindMissingKeyShared, nil
	}
	if bs.Values == nil {
		bs.Values = []string{}
	}
	return bs
}

// ThrottleStatsResult is the GetThrottleStatsResult frame of st.
func ThrottleStatsResult(st *service.ThrottleStats) *fibp.GetThrottleStatsResult {
	res := &fibp.GetThrottleStatsResult{ErrorCode: fibp.CodeOk, Summary: ThrottleSummary(&st.Summary),
		ActiveBuckets: st.Summary.ActiveBuckets, BucketsAtLimit: st.Summary.BucketsAtLimit, Waiting: st.Waiting}
	for _, q := range st.Summary.Queues {
		res.Queues = append(res.Queues, fibp.QueueRef{Queue: q})
	}
	for i := range st.Buckets {
		res.Buckets = append(res.Buckets, BucketStats(&st.Buckets[i]))
	}
	return res
}

var (
	getThrottleStats = adminOp(func(svc service.Service, _ Node, r *fibp.GetThrottleStats) (fibp.Frame, *service.Error) {
		st, e := svc.GetThrottleStats(r.Name, min(r.TopBuckets, MaxTopBuckets))
		if e != nil {
			return &fibp.GetThrottleStatsResult{ErrorCode: code(e)}, e
		}
		return ThrottleStatsResult(&st), nil
	})
	getThrottleBucket = adminOp(func(svc service.Service, _ Node, r *fibp.GetThrottleBucket) (fibp.Frame, *service.Error) {
		if r.BucketKind != fibp.BucketKindKeyed && r.BucketKind != fibp.BucketKindMissingKeyShared {
			e := &service.Error{Code: service.CodeInvalidConfigValue, Message: "unknown bucket_kind " + r.BucketKind.String()}
			return &fibp.GetThrottleBucketResult{ErrorCode: code(e)}, e
		}
		tb, e := svc.GetThrottleBucket(r.Name, r.BucketKind == fibp.BucketKindMissingKeyShared, r.Values)
		if e != nil {
			return &fibp.GetThrottleBucketResult{ErrorCode: code(e)}, e
		}
		return &fibp.GetThrottleBucketResult{ErrorCode: fibp.CodeOk, Bucket: BucketStats(&tb)}, nil
	})
)
