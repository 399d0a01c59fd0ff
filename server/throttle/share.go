package throttle

// Fair shares of the bucket memory. The bound (Registry.maxMemory) is split evenly between the
// holders of live throttles (the API keys that declared them), and each holder's part evenly
// between its live throttles: that is a throttle's share, what it may always hold. A throttle may
// hold more while the bound has room; when a new bucket of a throttle within its share does not
// fit, the throttles furthest over their shares give way (reclaim). So one consumer that makes
// ever new keys under a long window fills at most the room others leave, and every other
// throttle still gets buckets up to its share. Dormant throttles have no share: theirs are the
// first buckets forgotten (Registry.fits).
//
// Giving way keeps the limits exact: a live bucket forgotten may have deliveries inside its
// windows, so its throttle makes no new bucket (for any key) until they have left its largest
// window (evictedLast, newRoom), as after idle eviction. The cost falls on the throttle over its
// share, never on the one that asked for room.

// share is what throttle t may always hold now (0 when it is dormant). r.mu is held.
func (r *Registry) share(t *Throttle) int64 {
	n := r.holders[t.holder]
	if n == 0 || r.throttles[t.name] != t {
		return 0
	}
	return r.maxMemory / int64(len(r.holders)) / n
}

// Share is the bytes of bucket state throttle name may always hold now (0 when no live
// subscription declares it), and what its buckets hold.
func (r *Registry) Share(name string) (share, held int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.throttles[name]
	if t == nil {
		return 0, 0
	}
	return r.share(t), t.held
}

// reclaimFor is reclaim for the new buckets of a delivery (Take): want holds every throttle of
// refs, with the memory of its new buckets.
func (r *Registry) reclaimFor(need int64, refs []Ref) bool {
	want := map[*Throttle]int64{}
	for _, ref := range refs {
		want[ref.T] += 0
		if ref.T.buckets[ref.B] == nil {
			want[ref.T] += ref.T.newBucketMemory(ref.B)
		}
	}
	return r.reclaim(need, want)
}

// reclaim makes room for need more bytes, what the throttles of want grow by (each by its
// value), by forgetting the oldest buckets of the live throttles over their shares, the one
// furthest over first, and reports whether need fits then. It forgets nothing when a throttle of
// want would pass its own share (or is not live): that throttle waits for room as it did alone.
// The throttles of want never give way (their buckets are about to be counted in or grown).
// r.mu is held.
func (r *Registry) reclaim(need int64, want map[*Throttle]int64) bool {
	share := r.share
	for t, n := range want {
		if t.held+n > share(t) {
			return false
		}
	}
	for r.held+need > r.maxMemory {
		var v *Throttle
		var most int64
		for _, t := range r.throttles {
			if _, asking := want[t]; !asking && t.held-share(t) > most {
				v, most = t, t.held-share(t)
			}
		}
		if v == nil {
			return false
		}
		for v.oldest != nil && v.held > share(v) && r.held+need > r.maxMemory {
			v.evictedLast, v.evicted = max(v.evictedLast, v.oldest.lastAt), true
			v.drop(v.oldest)
		}
	}
	return true
}
