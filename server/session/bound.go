package session

import (
	"cmp"
	"slices"

	"github.com/filamq/fila/generated/fibp"
)

// MaxListBytes bounds each list of an admin answer (GetStats' fairness keys and throttles,
// ListQueues, ListConfig, ListApiKeys, GetThrottleStats' queues and buckets): entries are
// listed whole, in the answer's order, until the next would take the list's encoded size past
// it, so that no request makes the server build an answer larger than a few lists of this size
// (a GetStats of 3,000 fairness keys of 60 KB was a 180 MB answer). FIBP has no paging: the
// count field says how many are listed, and a client sees what was left out by comparing it with
// the totals (active_fairness_keys, the queues it created).
const MaxListBytes = 4 << 20

// MaxTopBuckets bounds GetThrottleStats' top_buckets: the server looks up at most this many
// buckets for one request, whatever the client asks.
const MaxTopBuckets = 1000

// Bound cuts every list of an admin answer to MaxListBytes. GetStats lists the fairness keys
// with the most pending messages (ties by key) when they do not all fit, still sorted by key.
func Bound(res fibp.Frame) {
	switch r := res.(type) {
	case *fibp.GetStatsResult:
		r.PerKeyStats = largestBacklogs(r.PerKeyStats)
		r.ActiveThrottles = capList(r.ActiveThrottles)
	case *fibp.ListQueuesResult:
		r.Queues = capList(r.Queues)
	case *fibp.ListConfigResult:
		r.Entries = capList(r.Entries)
	case *fibp.ListAPIKeysResult:
		r.Keys = capList(r.Keys)
	case *fibp.GetThrottleStatsResult:
		r.Queues = capList(r.Queues)
		r.Buckets = capList(r.Buckets)
	}
}

// listed counts the entries of s that fit MaxListBytes, in order.
func listed[T any, P interface {
	*T
	Size() int
}](s []T) int {
	n := 0
	for i := range s {
		if n += P(&s[i]).Size(); n > MaxListBytes {
			return i
		}
	}
	return len(s)
}

// capList keeps the entries of s that fit MaxListBytes, in order.
func capList[T any, P interface {
	*T
	Size() int
}](s []T) []T {
	return s[:listed[T, P](s)]
}

// largestBacklogs keeps the fairness keys that fit MaxListBytes: all of them when they do,
// else those with the most pending messages (ties by key), sorted by key again. It reorders ks.
func largestBacklogs(ks []fibp.FairnessKeyStat) []fibp.FairnessKeyStat {
	if listed(ks) == len(ks) {
		return ks
	}
	slices.SortFunc(ks, func(a, b fibp.FairnessKeyStat) int {
		if c := cmp.Compare(b.PendingCount, a.PendingCount); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	ks = ks[:listed(ks)]
	slices.SortFunc(ks, func(a, b fibp.FairnessKeyStat) int { return cmp.Compare(a.Key, b.Key) })
	return ks
}
