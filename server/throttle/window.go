package throttle

// A window counts one bucket's deliveries for one limit, "at most Max deliveries in any sliding
// window of WindowMs". Times are Unix milliseconds; a delivery at time t is inside the window
// ending at now when t > now − W (the window holds the W milliseconds now−W+1 … now).
//
// Two representations, chosen by the limit:
//
//   - exact (Max ≤ exactMax): the times of the last Max deliveries, a ring. There is room at now
//     when fewer than Max deliveries were ever counted or the oldest of the last Max is outside
//     the window. A saturated bucket achieves exactly N/W.
//   - slotted (larger Max): the window is cut into slots of width ⌈W/slotCount⌉ ms and the ring
//     keeps the counts of the slotCount+1 most recent slots. The count at now is the sum of the
//     slots that overlap the window, a conservative upper bound of the deliveries inside it (the
//     oldest slot may hold some that are already outside). A saturated bucket achieves about
//     N/(W+width): above 98% of N/W when W ≥ 64 ms, exact below (1 ms slots).
//
// Either way, a delivery is only counted after Room said yes, and Room counts every delivery
// still (possibly) inside the window: no window of W ever holds more than Max deliveries.
type window struct {
	lim Limit

	// exact
	times []int64 // ring of the last len(times) ≤ Max delivery times
	next  int     // index of the oldest time once the ring is full

	// slotted
	width int64    // slot width in ms
	slots []uint64 // counts, indexed by slot number mod len(slots)
	cur   int64    // slot number of the most recent slot kept
	total uint64   // sum of slots

	// blindUntil: the window was created without knowing how many deliveries are inside it, so
	// it has no room before this time and its count is no bound (see seed).
	blindUntil int64
}

const (
	exactMax  = 64
	slotCount = 64
)

func newWindow(l Limit) window {
	w := window{lim: l}
	if l.Max <= exactMax {
		w.times = make([]int64, 0, l.Max)
		return w
	}
	var n int64
	w.width, n = slotsOf(l)
	w.slots = make([]uint64, n)
	return w
}

// slotsOf is the slot width and the number of slots of a slotted window of l.
func slotsOf(l Limit) (width, n int64) {
	span := l.span()
	width = (span + slotCount - 1) / slotCount
	// Slots that overlap a window: at most ⌈W/width⌉ + 1 ≤ slotCount + 1.
	return width, (span+width-1)/width + 1
}

func (w *window) exact() bool { return w.slots == nil }

// windowStart is the earliest delivery time still inside the window ending at now.
func (w *window) windowStart(now int64) int64 { return now - w.lim.span() + 1 }

// slotOf is the slot number of time t (floor division; t may be negative near the epoch).
func (w *window) slotOf(t int64) int64 {
	if t >= 0 {
		return t / w.width
	}
	return -((-t + w.width - 1) / w.width)
}

// index is the ring position of slot number s.
func (w *window) index(s int64) int {
	n := int64(len(w.slots))
	return int((s%n + n) % n)
}

// advance moves the slot ring forward to now, dropping the slots that fall off its end.
func (w *window) advance(now int64) {
	c := w.slotOf(now)
	if c <= w.cur {
		return
	}
	n := int64(len(w.slots))
	if c-w.cur >= n {
		clear(w.slots)
		w.total = 0
	} else {
		for s := w.cur + 1; s <= c; s++ {
			i := w.index(s)
			w.total -= w.slots[i]
			w.slots[i] = 0
		}
	}
	w.cur = c
}

// count is the number of deliveries (conservatively, for a slotted window) inside the window
// ending at now. now must not be before the last delivery counted.
func (w *window) count(now int64) uint64 {
	start := w.windowStart(now)
	if w.exact() {
		var n uint64
		for _, t := range w.times {
			if t >= start {
				n++
			}
		}
		return n
	}
	w.advance(now)
	lo := w.slotOf(start)
	total := w.total
	// The ring holds the slots oldest … cur; lo is oldest or the one after.
	n := int64(len(w.slots))
	for s := w.cur - n + 1; s < lo; s++ {
		total -= w.slots[w.index(s)]
	}
	return total
}

// seed stands in for the deliveries made before the window existed: n of them at most, when
// known. They are counted at now (they leave the window no earlier than the real ones), so the
// count stays an upper bound. An unknown n, or an n an exact window cannot hold, makes the window
// blind for one window length: no room, as if full, and no bound for others to seed from.
func (w *window) seed(now int64, n uint64, known bool) {
	switch {
	case !known || w.exact() && n >= w.lim.Max:
		w.blindUntil = now + w.lim.span()
	case w.exact():
		for range n {
			w.add(now)
		}
	default:
		w.advance(now)
		w.slots[w.index(w.cur)] += n
		w.total += n
	}
}

// reported is the count GetThrottleBucket shows: a blind window counts as full.
func (w *window) reported(now int64) uint64 {
	if now < w.blindUntil {
		return w.lim.Max
	}
	return w.count(now)
}

// bound is count, and whether it bounds the deliveries inside the window (false while blind).
func (w *window) bound(now int64) (uint64, bool) {
	if now < w.blindUntil {
		return 0, false
	}
	return w.count(now), true
}

// room reports whether one more delivery at now keeps the window within its limit.
func (w *window) room(now int64) bool {
	if now < w.blindUntil {
		return false
	}
	if w.exact() {
		if uint64(len(w.times)) < w.lim.Max {
			return true
		}
		return w.times[w.next] < w.windowStart(now)
	}
	if w.total < w.lim.Max {
		return true // the ring holds at least what the window does: no need to move it
	}
	return w.count(now) < w.lim.Max
}

// add counts one delivery at now (room must have said yes).
func (w *window) add(now int64) {
	if w.exact() {
		if uint64(len(w.times)) < w.lim.Max {
			w.times = append(w.times, now)
			return
		}
		w.times[w.next] = now
		w.next = (w.next + 1) % len(w.times)
		return
	}
	if w.slotOf(now) != w.cur {
		w.advance(now)
	}
	w.slots[w.index(w.cur)]++
	w.total++
}

// nextRoom is the earliest time at or after now at which one more delivery fits, if nothing
// else is counted meanwhile.
func (w *window) nextRoom(now int64) int64 {
	if w.room(now) {
		return now
	}
	if now < w.blindUntil {
		return w.blindUntil // nothing is counted while blind: the window is empty then
	}
	W := w.lim.span()
	if w.exact() {
		return w.times[w.next] + W // the oldest of the last Max leaves the window then
	}
	// Drop slots from the oldest one that still counts until the count is below Max: slot s
	// stops counting once the window starts after it, at (s+1)·width + W − 1.
	count := w.count(now)
	for s := w.slotOf(w.windowStart(now)); s <= w.cur; s++ {
		count -= w.slots[w.index(s)]
		if count < w.lim.Max {
			return (s+1)*w.width + W - 1
		}
	}
	return w.cur*w.width + W // unreachable: room would have said yes
}
