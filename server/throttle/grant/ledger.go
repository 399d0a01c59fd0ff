package grant

import (
	"slices"

	"github.com/filamq/fila/server/throttle"
)

// ledger is one bucket's tokens at the owner, each at its record time (package doc): settled
// tokens as (time, count) entries, outstanding grants at their lease end.
type ledger struct {
	entries []entry
	grants  map[uint64]outstanding // by GrantID.Seq
	// pruned: tokens recorded at or before it may have been forgotten, so a window that starts
	// at or before it has no known count (a limit whose window is longer than those kept).
	pruned    int64
	hasPruned bool
}

type entry struct {
	at int64
	n  uint64
}

type outstanding struct {
	n   uint64
	end int64
}

// record counts n tokens at time at.
func (b *ledger) record(at int64, n uint64) {
	if k := len(b.entries); k > 0 && b.entries[k-1].at == at {
		b.entries[k-1].n += n
		return
	}
	b.entries = append(b.entries, entry{at: at, n: n})
}

// prune forgets what no window after `before` can hold: entries at or before it, and grants whose
// lease ended by then (their tokens are as counted at their end, which is before every window).
func (b *ledger) prune(before int64) {
	if !b.hasPruned || before > b.pruned {
		b.pruned, b.hasPruned = before, true
	}
	b.entries = slices.DeleteFunc(b.entries, func(e entry) bool { return e.at <= before })
	for s, g := range b.grants {
		if g.end <= before {
			delete(b.grants, s)
		}
	}
}

// known reports whether count(after) is exact: nothing after `after` was pruned.
func (b *ledger) known(after int64) bool { return !b.hasPruned || after >= b.pruned }

// count is the number of tokens recorded after `after`.
func (b *ledger) count(after int64) uint64 {
	var n uint64
	for _, e := range b.entries {
		if e.at > after {
			n += e.n
		}
	}
	for _, g := range b.grants {
		if g.end > after {
			n += g.n
		}
	}
	return n
}

// nextRoom is the earliest time after now at which limit l has room for one more token, if
// nothing else is recorded meanwhile.
func (b *ledger) nextRoom(now int64, l throttle.Limit) int64 {
	after := now - l.Span()
	var in []entry
	for _, e := range b.entries {
		if e.at > after {
			in = append(in, e)
		}
	}
	for _, g := range b.grants {
		if g.end > after {
			in = append(in, entry{at: g.end, n: g.n})
		}
	}
	slices.SortFunc(in, func(x, y entry) int { return compareInt(x.at, y.at) })
	var total uint64
	for _, e := range in {
		total += e.n
	}
	// Drop the oldest tokens until fewer than Max remain: the last one dropped leaves the window
	// at its time + W.
	for _, e := range in {
		total -= e.n
		if total < l.Max {
			return e.at + l.Span()
		}
	}
	return now + 1 // unreachable: the limit has room
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
