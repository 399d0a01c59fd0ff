package engine

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
)

// The fairness-key table of the admin API: a page of the keys with stored messages, sorted, with
// their backlog, weight, deficit, deliveries in the last minute and weighted share. One pass over
// the keys keeps the page's rows in a bounded heap (O(k log n) for k keys and a page of n), so a
// page of the top keys of a queue with 100,000 of them never holds more than the page.

// KeySort is the order of a key table.
type KeySort uint8

const (
	// KeysByBacklog: the largest backlog first, ties by key.
	KeysByBacklog KeySort = iota
	// KeysByDeliveries: the most deliveries in the last minute first, ties by key.
	KeysByDeliveries
	// KeysByName: by key.
	KeysByName
)

var keySortNames = [...]string{"backlog", "deliveries", "name"}

// String returns the sort's name as the admin API spells it.
func (s KeySort) String() string {
	if int(s) < len(keySortNames) {
		return keySortNames[s]
	}
	return fmt.Sprintf("KeySort(%d)", uint8(s))
}

// ParseKeySort reads a sort's name ("" is KeysByBacklog).
func ParseKeySort(name string) (KeySort, bool) {
	if name == "" {
		return KeysByBacklog, true
	}
	for i, n := range keySortNames {
		if n == name {
			return KeySort(i), true
		}
	}
	return 0, false
}

// KeyTableOptions selects a page of the key table.
type KeyTableOptions struct {
	// Search keeps the keys containing it ("" keeps every key).
	Search string
	Sort   KeySort
	// After continues the table after this key (the Next of the previous page), in the order of
	// Sort as it stands now: for KeysByBacklog and KeysByDeliveries the key's current figure
	// places it (a key gone since places as a key with zero).
	After string
	// Limit is the page's size (at least 1).
	Limit int
}

// KeyRow is one fairness key of the table.
type KeyRow struct {
	Key string
	// Backlog counts its stored messages not in flight; Ready those in its FIFO; InFlight its
	// leased ones.
	Backlog, Ready, InFlight uint64
	Weight                   uint32
	Deficit                  uint64
	DeliveriesLastMinute     uint64
	// WeightedShare is the fraction of the queue's deliveries its weight entitles it to among
	// the keys with a backlog (0 without a backlog).
	WeightedShare float64
}

// KeyTable is a page of the key table.
type KeyTable struct {
	Keys []KeyRow
	// Next is the key to ask the next page after ("" when this page is the last).
	Next string
	// Total counts the keys matching Search.
	Total int
	// DeliveriesLastMinute counts the queue's deliveries in the last minute; BacklogWeight sums
	// the weights of the keys with a backlog (the denominator of WeightedShare).
	DeliveriesLastMinute uint64
	BacklogWeight        uint64
}

// KeyTable returns a page of the queue's fairness keys (those with a stored message) at now
// (Unix ms). It costs one pass over the keys and one over the leases (to count each key's in
// flight): O(k log n + l) for k keys, a page of n and l leases, and 4 bytes a key while it runs.
func (q *Queue) KeyTable(now int64, o KeyTableOptions) KeyTable {
	limit := max(o.Limit, 1)
	leased := q.leasedPerKey()
	t := KeyTable{DeliveriesLastMinute: q.DeliveriesLastMinute(now), BacklogWeight: q.backlogWeight(leased)}
	var cursor *KeyRow
	if o.After != "" {
		c := KeyRow{Key: o.After}
		if k, ok := q.keyIdx[o.After]; ok {
			c = q.keyRow(k, leased, now, o.Sort == KeysByDeliveries)
		}
		cursor = &c
	}
	page := rowHeap{sort: o.Sort}
	for i := range q.keys {
		ks := &q.keys[i]
		if ks.refs == 0 || (o.Search != "" && !strings.Contains(ks.name, o.Search)) {
			continue
		}
		t.Total++
		row := q.keyRow(uint32(i), leased, now, o.Sort == KeysByDeliveries)
		if cursor != nil && !rowBefore(o.Sort, cursor, &row) {
			continue
		}
		if page.Len() <= limit { // one more than the page, to know whether another follows
			heap.Push(&page, row)
		} else if rowBefore(o.Sort, &row, &page.rows[0]) {
			page.rows[0] = row
			heap.Fix(&page, 0)
		}
	}
	rows := page.rows
	slices.SortFunc(rows, func(a, b KeyRow) int {
		if rowBefore(o.Sort, &a, &b) {
			return -1
		}
		return 1
	})
	if len(rows) > limit {
		rows = rows[:limit]
		t.Next = rows[limit-1].Key
	}
	for i := range rows {
		if o.Sort != KeysByDeliveries { // read for the page's rows only
			rows[i].DeliveriesLastMinute = q.rates.ofKey(q.keyIdx[rows[i].Key], now)
		}
		if rows[i].Backlog > 0 && t.BacklogWeight > 0 {
			rows[i].WeightedShare = float64(rows[i].Weight) / float64(t.BacklogWeight)
		}
	}
	t.Keys = rows
	return t
}

// keyRow reads key k's row (without its share, and without its deliveries unless deliveries;
// leased: leasedPerKey).
func (q *Queue) keyRow(k uint32, leased []uint32, now int64, deliveries bool) KeyRow {
	ks := &q.keys[k]
	inFlight := leasedOf(leased, k)
	row := KeyRow{Key: ks.name, Backlog: uint64(ks.refs - inFlight), Ready: uint64(ks.pending), InFlight: uint64(inFlight),
		Weight: ks.weight, Deficit: ks.deficit}
	if deliveries {
		row.DeliveriesLastMinute = q.rates.ofKey(k, now)
	}
	return row
}

// rowBefore reports whether row a comes before row b in sort s (keys are unique, so two rows of
// different keys are never equal).
func rowBefore(s KeySort, a, b *KeyRow) bool {
	switch s {
	case KeysByBacklog:
		if a.Backlog != b.Backlog {
			return a.Backlog > b.Backlog
		}
	case KeysByDeliveries:
		if a.DeliveriesLastMinute != b.DeliveriesLastMinute {
			return a.DeliveriesLastMinute > b.DeliveriesLastMinute
		}
	}
	return a.Key < b.Key
}

// rowHeap holds the best rows seen so far with the worst on top (container/heap), to be replaced
// by a better one.
type rowHeap struct {
	sort KeySort
	rows []KeyRow
}

func (h *rowHeap) Len() int           { return len(h.rows) }
func (h *rowHeap) Less(i, j int) bool { return rowBefore(h.sort, &h.rows[j], &h.rows[i]) }
func (h *rowHeap) Swap(i, j int)      { h.rows[i], h.rows[j] = h.rows[j], h.rows[i] }
func (h *rowHeap) Push(x any)         { h.rows = append(h.rows, x.(KeyRow)) }
func (h *rowHeap) Pop() any {
	x := h.rows[len(h.rows)-1]
	h.rows = h.rows[:len(h.rows)-1]
	return x
}

// KeyCount counts the fairness keys with a stored message: the rows of the key table without a
// search.
func (q *Queue) KeyCount() int { return len(q.keyIdx) }

// ReadyCount counts the messages in the fairness keys' FIFOs: those Dispatch delivers in DRR
// order (not held, throttled, delayed, waiting behind their group's head, parked or leased).
func (q *Queue) ReadyCount() int { return q.ready }
