package broker

import (
	"cmp"
	"errors"
	"slices"

	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/throttle"
)

func throttleNotFound(err error) *Error {
	if errors.Is(err, throttle.ErrNotFound) {
		return errorf(CodeThrottleNotFound, "%v", err)
	}
	return errorf(CodeInternalError, "%v", err)
}

// waitingIn asks every queue where throttle name is active how many messages each bucket of it
// holds parked.
func (b *Broker) waitingIn(name string, queues []string) map[throttle.BucketKey]uint64 {
	w := map[throttle.BucketKey]uint64{}
	t, ok := b.throttles.Lookup(name)
	if !ok {
		return w
	}
	for _, q := range queues {
		r := b.lookup(q)
		if r.a == nil {
			continue
		}
		if r.a.asleep(func(*summary) {}) {
			continue // a sleeping group has no throttle
		}
		r.a.call(func(a *actor) {
			if lt := a.lanes[r.lane].throttles; lt != nil {
				lt.waiting(a.st.Lane(r.lane), t, w)
			}
		})
	}
	return w
}

// GetThrottleStats describes throttle name with its top most-waiting buckets (most waiting
// first, then by key). It fails with CodeThrottleNotFound when no live subscription declares it.
func (b *Broker) GetThrottleStats(name string, top uint32) (ThrottleStats, *Error) {
	now := b.clock().UnixMilli()
	sum, err := b.throttles.Stats(name, now)
	if err != nil {
		return ThrottleStats{}, throttleNotFound(err)
	}
	waiting := b.waitingIn(name, sum.Queues)
	if b.ct != nil { // the other nodes' subscriptions, queues and waiting messages
		b.ct.othersPart(name, &sum, waiting)
	}
	st := ThrottleStats{Summary: sum}
	keysByWaiting := make([]throttle.BucketKey, 0, len(waiting))
	for k, n := range waiting {
		st.Waiting += n
		keysByWaiting = append(keysByWaiting, k)
	}
	slices.SortFunc(keysByWaiting, func(x, y throttle.BucketKey) int {
		if c := cmp.Compare(waiting[y], waiting[x]); c != 0 {
			return c
		}
		if c := cmp.Compare(bucketKind(x), bucketKind(y)); c != 0 {
			return c
		}
		return cmp.Compare(x.Group, y.Group)
	})
	topKeys := keysByWaiting[:min(len(keysByWaiting), int(top))]
	if f, e := b.clusterFigures(name, topKeys); e != nil {
		return ThrottleStats{}, e
	} else if f != nil { // a cluster's throttle: what its owner counts
		st.Summary.Limits, st.Summary.ActiveBuckets, st.Summary.BucketsAtLimit = f.limits, f.active, f.atLimit
		for i, k := range topKeys {
			st.Buckets = append(st.Buckets, bucketReport(f.buckets[i], waiting[k]))
		}
		return st, nil
	}
	for _, k := range topKeys {
		bs, err := b.throttles.Bucket(name, k, now)
		if err != nil {
			return ThrottleStats{}, throttleNotFound(err) // the throttle ended meanwhile
		}
		st.Buckets = append(st.Buckets, bucketReport(bs, waiting[k]))
	}
	return st, nil
}

func bucketKind(k throttle.BucketKey) int {
	if k.Missing {
		return 1
	}
	return 0
}

func bucketReport(bs throttle.BucketStats, waiting uint64) ThrottleBucket {
	tb := ThrottleBucket{Missing: bs.Key.Missing, Counted: bs.Counted, Waiting: waiting, NextRoomAt: bs.NextRoomAt}
	if !bs.Key.Missing {
		tb.Values, _ = keys.SplitGroup(bs.Key.Group, nil)
	}
	return tb
}

// GetThrottleBucket describes one bucket of throttle name: the shared bucket of messages
// missing the key (missing), or the bucket of values (one per key part; none for an unkeyed
// throttle). A bucket without deliveries inside its windows reports zeros. It fails with
// CodeThrottleNotFound when no live subscription declares the throttle.
func (b *Broker) GetThrottleBucket(name string, missing bool, values []string) (ThrottleBucket, *Error) {
	now := b.clock().UnixMilli()
	key := throttle.BucketKey{Missing: missing}
	if !missing {
		key.Group = keys.JoinGroup(values)
	}
	sum, err := b.throttles.Stats(name, now)
	if err != nil {
		return ThrottleBucket{}, throttleNotFound(err)
	}
	bs, err := b.throttles.Bucket(name, key, now)
	if err != nil {
		return ThrottleBucket{}, throttleNotFound(err)
	}
	if f, e := b.clusterFigures(name, []throttle.BucketKey{key}); e != nil {
		return ThrottleBucket{}, e
	} else if f != nil {
		bs = f.buckets[0] // a cluster's throttle: what its owner counts
	}
	waiting := b.waitingIn(name, sum.Queues)
	if b.ct != nil {
		b.ct.othersPart(name, &sum, waiting)
	}
	tb := bucketReport(bs, waiting[key])
	if !missing {
		tb.Values = slices.Clone(values)
	}
	return tb, nil
}

// queueThrottles are the throttles active on a queue, for GetStats.
func (b *Broker) queueThrottles(queue string) []ThrottleSummary {
	return b.throttles.QueueThrottles(queue)
}

// clusterFigures is what the owner of a cluster's throttle counts (nil on a single node, and for
// a throttle under which nothing was delivered yet: the registry's zeros are exact then). On a
// node of a cluster the registry counts nothing; counted, next room, the effective limits and
// the active and full buckets are the owner's, cluster-wide, and waiting, the subscribers and
// the queues every node's (othersPart).
func (b *Broker) clusterFigures(name string, keys []throttle.BucketKey) (*ownerFigures, *Error) {
	if b.ct == nil {
		return nil, nil
	}
	return b.ct.figures(name, keys)
}
