package engine

import (
	"cmp"
	"iter"
)

// Counts returns the queue's counters as Stats does, without Keys: O(1), where Stats costs
// O(k log k) for k stored fairness keys.
func (q *Queue) Counts() Stats {
	s := Stats{
		Depth:              uint64(int(q.slab.live) - q.inFlight),
		InFlight:           uint64(q.inFlight),
		Delayed:            uint64(q.nDelayed),
		Held:               uint64(q.nHeld),
		Throttled:          uint64(q.park.n),
		ActiveFairnessKeys: uint64(q.active.n),
		ActiveConsumers:    uint32(len(q.subIdx)),
		Quantum:            q.cfg.Quantum,
	}
	s.Unclassified = uint64(q.uncl.parked)
	s.OldestUnclassifiedAt, _ = q.OldestUnclassified()
	if !q.groups.off {
		s.OrderingGroups, s.BlockedGroups = uint64(len(q.groups.idx)), uint64(q.groups.leased)
	}
	return s
}

// TopKeys returns the at most n fairness keys with the most ready messages, most first, ties
// by key; keys with none are left out. It costs O(k) for k fairness keys when n is small, where
// sorting Stats' Keys costs O(k log k).
func (q *Queue) TopKeys(n int) []KeyStats {
	return TopKeys(func(yield func(KeyStats) bool) {
		for i := range q.keys {
			ks := &q.keys[i]
			if ks.refs == 0 || ks.pending == 0 {
				continue
			}
			if !yield(KeyStats{Key: ks.name, Pending: uint64(ks.pending), Deficit: int64(min(ks.deficit, 1<<63-1)), Weight: ks.weight}) {
				return
			}
		}
	}, n)
}

// TopKeys returns the at most n of keys with the most ready messages, most first, ties by key;
// keys with none are left out.
func TopKeys(keys iter.Seq[KeyStats], n int) []KeyStats {
	if n <= 0 {
		return nil
	}
	var top []KeyStats                   // made at the first key with ready messages
	before := func(a, b KeyStats) bool { // a ranks before b
		if c := cmp.Compare(b.Pending, a.Pending); c != 0 {
			return c < 0
		}
		return a.Key < b.Key
	}
	for k := range keys {
		if k.Pending == 0 || (len(top) == n && !before(k, top[n-1])) {
			continue
		}
		if top == nil {
			top = make([]KeyStats, 0, n)
		}
		if len(top) < n {
			top = append(top, k)
		} else {
			top[n-1] = k
		}
		for i := len(top) - 1; i > 0 && before(top[i], top[i-1]); i-- { // insertion: top stays sorted
			top[i], top[i-1] = top[i-1], top[i]
		}
	}
	return top
}
