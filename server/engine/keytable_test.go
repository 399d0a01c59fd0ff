package engine

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// Deliveries are counted per second over the last minute, per key and for the queue; a key's
// ring goes with the key, and idle rings are swept when another key needs one.
func TestDeliveriesLastMinute(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	for n := uint64(1); n <= 10; n++ {
		enqueue(t, q, 1_000, msg(n, "a", 1), msg(100+n, "b", 1))
	}
	q.Dispatch(1_000, 4, nil)  // a, b, a, b at second 1
	q.Dispatch(30_500, 2, nil) // a, b at second 30
	q.Dispatch(60_999, 1, nil) // a at second 60
	check := func(now int64, a, b, total uint64) {
		t.Helper()
		if got := [3]uint64{q.KeyDeliveriesLastMinute("a", now), q.KeyDeliveriesLastMinute("b", now), q.DeliveriesLastMinute(now)}; got != [3]uint64{a, b, total} {
			t.Errorf("at %d: a, b, total = %v, want %v", now, got, [3]uint64{a, b, total})
		}
	}
	check(60_999, 4, 3, 7)
	check(61_000, 2, 1, 3) // second 1 left the window
	check(90_000, 1, 0, 1)
	check(200_000, 0, 0, 0)
	// A key's ring goes with its last message; a ring idle for a minute is swept.
	for _, id := range []uint64{101, 102, 103, 104, 105, 106, 107, 108, 109, 110} {
		if m, _ := q.Get(mid(id)); m.State == StateLeased {
			must(t, q.ApplyAck(Ack{ID: mid(id), At: 61_000}))
		} else {
			_, err := q.ApplyRemove(Remove{ID: mid(id), At: 61_000})
			must(t, err)
		}
	}
	if q.KeyDeliveriesLastMinute("b", 61_000) != 0 || len(q.rates.free) != 1 {
		t.Fatalf("b's ring not given back: %d free", len(q.rates.free))
	}
	enqueue(t, q, 200_000, msg(200, "c", 1))
	q.rates.count(q.keyIdx["c"], 200_000)
	q.rates.flush() // sweeps a's idle ring: no ring was left, c has the first
	if len(q.rates.rings) != 1 || q.rates.of[q.keyIdx["a"]] != 0 || q.KeyDeliveriesLastMinute("c", 200_000) != 1 {
		t.Fatalf("a's idle ring not swept: %+v", q.rates.of)
	}
}

// One rateRing against a naive list of delivery times.
func TestRateRingMatchesTwin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var times []int64
		now := int64(rapid.IntRange(0, 100).Draw(t, "start"))
		r := newRateRing(nilIdx, now)
		for range rapid.IntRange(0, 200).Draw(t, "steps") {
			now += int64(rapid.IntRange(0, 20).Draw(t, "tick"))
			if rapid.Bool().Draw(t, "count") {
				r.addN(now, 1)
				times = append(times, now)
			}
			want := uint64(0)
			for _, s := range times {
				if s > now-rateWindow && s <= now {
					want++
				}
			}
			if got := r.sum(now); got != want {
				t.Fatalf("at %d: %d, want %d", now, got, want)
			}
		}
	})
}

// Every page of the key table, followed by Next, lists each matching key once, in the order of
// the sort, against a sort of all the rows; shares sum to 1 over the keys with a backlog.
func TestKeyTablePages(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := newTestQueue(t, DefaultConfig())
		must(t, q.Subscribe("c", 0))
		nkeys := rapid.IntRange(1, 40).Draw(t, "keys")
		for n := range rapid.IntRange(1, 300).Draw(t, "messages") {
			k := rapid.IntRange(0, nkeys-1).Draw(t, "key")
			enqueue(t, q, 1_000, msg(uint64(n+1), fmt.Sprint("tenant-", k), uint32(1+k%3)))
		}
		q.Dispatch(1_000, rapid.IntRange(0, 100).Draw(t, "dispatch"), nil)
		o := KeyTableOptions{Sort: KeySort(rapid.IntRange(0, 2).Draw(t, "sort")), Limit: rapid.IntRange(1, 15).Draw(t, "limit")}
		if rapid.Bool().Draw(t, "search") {
			o.Search = fmt.Sprint(rapid.IntRange(0, 9).Draw(t, "digit"))
		}
		all := q.KeyTable(2_000, KeyTableOptions{Sort: o.Sort, Search: o.Search, Limit: 1 << 20})
		if !slices.IsSortedFunc(all.Keys, func(a, b KeyRow) int {
			if rowBefore(o.Sort, &a, &b) {
				return -1
			}
			return 1
		}) {
			t.Fatalf("not sorted by %v: %+v", o.Sort, all.Keys)
		}
		var paged []KeyRow
		for {
			p := q.KeyTable(2_000, o)
			if p.Total != len(all.Keys) || len(p.Keys) > o.Limit {
				t.Fatalf("page of %d, total %d; all %d", len(p.Keys), p.Total, len(all.Keys))
			}
			paged = append(paged, p.Keys...)
			if p.Next == "" {
				break
			}
			o.After = p.Next
		}
		if !slices.Equal(paged, all.Keys) {
			t.Fatalf("pages\n%+v\nall\n%+v", paged, all.Keys)
		}
		share, want := 0.0, 0.0
		for _, r := range q.KeyTable(2_000, KeyTableOptions{Limit: 1 << 20}).Keys {
			share += r.WeightedShare
			if r.Backlog > 0 {
				want = 1
			}
		}
		if share < want-1e-9 || share > want+1e-9 {
			t.Fatalf("shares sum to %v", share)
		}
	})
}

func TestKeyTableFigures(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	must(t, q.Subscribe("c", 0))
	enqueue(t, q, 1_000, msg(1, "a", 3), msg(2, "a", 3), msg(3, "b", 1), msg(4, "c", 1))
	q.Dispatch(1_000, 2, nil) // a twice (deficit 3)
	p := q.KeyTable(2_000, KeyTableOptions{Limit: 2})
	want := KeyTable{Keys: []KeyRow{
		{Key: "b", Backlog: 1, Ready: 1, Weight: 1, WeightedShare: 0.5},
		{Key: "c", Backlog: 1, Ready: 1, Weight: 1, WeightedShare: 0.5},
	}, Next: "c", Total: 3, DeliveriesLastMinute: 2, BacklogWeight: 2}
	if !slices.EqualFunc(p.Keys, want.Keys, func(a, b KeyRow) bool { return a == b }) || p.Next != want.Next ||
		p.Total != want.Total || p.DeliveriesLastMinute != 2 || p.BacklogWeight != 2 {
		t.Fatalf("page\n got %+v\nwant %+v", p, want)
	}
	p = q.KeyTable(2_000, KeyTableOptions{Sort: KeysByDeliveries, Limit: 1})
	if r := p.Keys[0]; r.Key != "a" || r.DeliveriesLastMinute != 2 || r.InFlight != 2 || r.Backlog != 0 || r.Deficit != 0 || r.WeightedShare != 0 {
		t.Fatalf("by deliveries: %+v", p.Keys)
	}
	if s, ok := ParseKeySort("deliveries"); !ok || s != KeysByDeliveries {
		t.Fatal("ParseKeySort")
	}
	if _, ok := ParseKeySort("depth"); ok {
		t.Fatal("ParseKeySort accepts depth")
	}
}

// The top page of 100,000 keys (by backlog), and the next page after it.
func BenchmarkKeyTable(b *testing.B) {
	q := newTestQueue(b, benchConfig())
	must(b, q.Subscribe("c", 0))
	keys := keyNames(100_000)
	fill(b, q, keys, 0, 1_000_000)
	q.Dispatch(2, 50_000, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p := q.KeyTable(3, KeyTableOptions{Limit: 100})
		q.KeyTable(3, KeyTableOptions{Limit: 100, After: p.Next})
	}
}

// deliveryRates (runs, rings, sweeps and forgotten keys) against a naive list of deliveries.
func TestDeliveryRatesMatchTwin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var d deliveryRates
		type delivery struct {
			k  uint32
			at int64
		}
		var log []delivery
		now := int64(rapid.IntRange(0, 5_000).Draw(t, "start"))
		for range rapid.IntRange(0, 300).Draw(t, "steps") {
			now += int64(rapid.IntRange(0, 3_000).Draw(t, "tick"))
			k := uint32(rapid.IntRange(0, 5).Draw(t, "key"))
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // the key's last message goes: its counts go with it
				d.forget(k)
				kept := log[:0]
				for _, x := range log {
					if x.k != k {
						kept = append(kept, x)
					} else {
						kept = append(kept, delivery{k: nilIdx, at: x.at}) // still the queue's
					}
				}
				log = kept
			default:
				d.count(k, now)
				log = append(log, delivery{k, now})
			}
			var want [6]uint64
			var total uint64
			for _, x := range log {
				if secondOf(x.at) > secondOf(now)-rateWindow {
					total++
					if x.k != nilIdx {
						want[x.k]++
					}
				}
			}
			for k := range uint32(6) {
				if got := d.ofKey(k, now); got != want[k] {
					t.Fatalf("key %d at %d: %d, want %d", k, now, got, want[k])
				}
			}
			d.flush()
			if got := d.total.sum(secondOf(now)); got != total {
				t.Fatalf("total at %d: %d, want %d", now, got, total)
			}
		}
	})
}
