package engine

// Deliveries over the last minute, per fairness key and for the queue (the key table and the
// explanations of the admin API). Dispatch counts each delivery it makes in O(1): a delivery of the
// key of the one before, in the same second, is one increment of the current run (deliveryRates.
// runN; a key's whole DRR turn is delivered in a row), and a run goes to two per-second counters,
// the queue's and its key's, when another begins or a reader looks. Only keys with a delivery in
// the last minute keep a ring of counters (rateRing, 256 bytes); every other key costs the 4
// bytes of its entry in deliveryRates.of. A ring is given back when its key is forgotten, and
// rings left idle for a minute are found and given back by a sweep that looks at two rings
// whenever a key needs a new one, so the rings stay about as many as the keys that delivered in
// the last minute.
//
// The counts are live state of the node that delivers, like subscriptions: leases applied from
// the log (a replay, a replica) are not counted, and snapshots carry none.

// rateWindow is the window of the counts, in seconds: a count covers the current second and the
// 59 before it (between 59 and 60 seconds of deliveries).
const rateWindow = 60

// rateRing counts deliveries per second over the last rateWindow seconds.
type rateRing struct {
	last   int64              // the latest second counted (Unix s); counts[slotOf(s)] is second s, for s in (last−rateWindow, last]
	slot   uint32             // slotOf(last)
	key    uint32             // the key the ring counts for, or nilIdx for the queue's own ring and free rings
	counts [rateWindow]uint32 // deliveries per second (4 billion a second would wrap)
}

// newRateRing is a ring with nothing counted, last at second sec.
func newRateRing(key uint32, sec int64) rateRing {
	return rateRing{key: key, last: sec, slot: uint32(slotOf(sec))}
}

// addN counts n deliveries at second sec: in the second counted last, one addition; else addAt.
func (r *rateRing) addN(sec int64, n uint32) {
	if sec != r.last {
		r.addAt(sec, n)
		return
	}
	r.counts[r.slot] += n
}

// addAt counts n deliveries at a second other than the last counted. A second before the window
// is not counted (the engine's times do not go back, so it happens only to a clock set back by a
// minute).
func (r *rateRing) addAt(sec int64, n uint32) {
	i := r.slot
	switch {
	case sec > r.last:
		r.roll(sec)
		i = r.slot
	case sec <= r.last-rateWindow:
		return
	default:
		i = uint32(slotOf(sec))
	}
	r.counts[i] += n
}

// roll moves the ring on to second sec (after last), clearing the seconds in between.
func (r *rateRing) roll(sec int64) {
	if sec-r.last >= rateWindow {
		clear(r.counts[:])
	} else {
		for s := r.last + 1; s <= sec; s++ {
			r.counts[slotOf(s)] = 0
		}
	}
	r.last, r.slot = sec, uint32(slotOf(sec))
}

// sum counts the deliveries of the seconds (now−rateWindow, now].
func (r *rateRing) sum(now int64) uint64 {
	var n uint64
	for s := max(now, r.last) - rateWindow + 1; s <= min(now, r.last); s++ {
		if s > r.last-rateWindow {
			n += uint64(r.counts[slotOf(s)])
		}
	}
	return n
}

// idle reports whether the ring has counted nothing in the window ending at second now.
func (r *rateRing) idle(now int64) bool { return r.last <= now-rateWindow }

// slotOf is the counter of second sec (any 60 consecutive seconds have distinct counters).
func slotOf(sec int64) int { return int((sec%rateWindow + rateWindow) % rateWindow) }

// deliveryRates is a Queue's delivery counts.
type deliveryRates struct {
	total rateRing
	of    []uint32   // by key index: 1 + the index of the key's ring in rings, 0 for none
	rings []rateRing // key == nilIdx: free
	free  []uint32
	sweep int // the next ring the sweep looks at

	// The deliveries of the current second not yet in the rings: runN of the key runKey delivered
	// last (Dispatch delivers a key's whole DRR turn in a row), secN of the queue's before them.
	// A delivery of the same key in the same second is one increment; every reader flushes them
	// first.
	runFrom    int64 // the current second, in Unix ms (from runFrom to runFrom + 999)
	secN, runN uint32
	runKey     uint32
}

// secondOf is the second (Unix s) of a time in Unix ms.
func secondOf(ms int64) int64 {
	if ms < 0 {
		return (ms - 999) / 1000
	}
	return ms / 1000
}

// count counts one delivery of key k at now (Unix ms): in the current second, of the key
// delivered last, one increment (inlined in Dispatch); else countAt.
func (d *deliveryRates) count(k uint32, now int64) {
	if k == d.runKey && uint64(now-d.runFrom) < 1000 {
		d.runN++
		return
	}
	d.countAt(k, now)
}

// countAt counts one delivery of another key than the last, or in another second.
func (d *deliveryRates) countAt(k uint32, now int64) {
	if uint64(now-d.runFrom) < 1000 {
		d.flushKey()
	} else {
		d.flush()
		d.runFrom = secondOf(now) * 1000
	}
	d.runKey, d.runN = k, 1
}

// flush counts the current second's deliveries in the queue's ring and the last key's.
func (d *deliveryRates) flush() {
	d.flushKey()
	if d.secN > 0 {
		d.total.addN(secondOf(d.runFrom), d.secN)
		d.secN = 0
	}
}

// flushKey counts the deliveries of runKey in the current second in its ring, and adds them to
// the queue's for the second (secN).
func (d *deliveryRates) flushKey() {
	if d.runN == 0 {
		return
	}
	k, n, sec := d.runKey, d.runN, secondOf(d.runFrom)
	d.runN = 0
	d.secN += n
	if int(k) < len(d.of) {
		if i := d.of[k]; i != 0 {
			d.rings[i-1].addN(sec, n)
			return
		}
	}
	d.ringFor(k, sec).addN(sec, n)
}

// ringFor gives key k a ring (it has none), after sweeping two rings.
func (d *deliveryRates) ringFor(k uint32, sec int64) *rateRing {
	for range 2 {
		if len(d.rings) == 0 {
			break
		}
		if d.sweep >= len(d.rings) {
			d.sweep = 0
		}
		if r := &d.rings[d.sweep]; r.key != nilIdx && r.idle(sec) {
			d.forget(r.key)
		}
		d.sweep++
	}
	for int(k) >= len(d.of) {
		d.of = append(d.of, 0)
	}
	var i uint32
	if n := len(d.free); n > 0 {
		i = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		i = uint32(len(d.rings))
		d.rings = append(d.rings, rateRing{})
	}
	d.rings[i] = newRateRing(k, sec)
	d.of[k] = i + 1
	return &d.rings[i]
}

// forget gives back the ring of key k, which is forgotten or idle.
func (d *deliveryRates) forget(k uint32) {
	d.flush()
	if int(k) >= len(d.of) || d.of[k] == 0 {
		return
	}
	i := d.of[k] - 1
	d.of[k] = 0
	d.rings[i] = rateRing{key: nilIdx}
	d.free = append(d.free, i)
	if len(d.free) == len(d.rings) { // no ring left: give the tables back
		d.rings, d.free, d.of, d.sweep = d.rings[:0], d.free[:0], d.of[:0], 0
	}
}

// ofKey counts the deliveries of key k in the window ending at now (Unix ms).
func (d *deliveryRates) ofKey(k uint32, now int64) uint64 {
	d.flush()
	if int(k) >= len(d.of) || d.of[k] == 0 {
		return 0
	}
	return d.rings[d.of[k]-1].sum(secondOf(now))
}

// DeliveriesLastMinute counts the deliveries Dispatch made in the last minute up to now (Unix
// ms): between 59 and 60 seconds, the current second included.
func (q *Queue) DeliveriesLastMinute(now int64) uint64 {
	q.rates.flush()
	return q.rates.total.sum(secondOf(now))
}

// KeyDeliveriesLastMinute is DeliveriesLastMinute for the fairness key name (0 for a key with
// no stored message: a key's counts go when its last message does).
func (q *Queue) KeyDeliveriesLastMinute(name string, now int64) uint64 {
	k, ok := q.keyIdx[name]
	if !ok {
		return 0
	}
	return q.rates.ofKey(k, now)
}
