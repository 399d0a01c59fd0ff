package broker

import (
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/membudget"
)

// Deduplication memory (deduplication.md): every identity a queue remembers costs memory for
// its whole window, however soon its message is acked. It is bounded per queue
// (dedup.max_identities_per_queue) and per node (dedup.max_identities), and counted in the
// server's memory budget (Options.MemoryBudget, memory_budget) at identityBytes each, of which
// the identities may take half. A message with a new identity that would pass a bound is refused
// ChannelFull (the producer retries it once identities have expired) rather than accepted with an
// identity forgotten early: that would let a retry in as a second message, which deduplication
// promises never happens. Duplicates are still answered, and messages without an identity are
// not affected. Windows are at most MaxDedupWindowMs.

// identityBytes is the memory one remembered identity is counted for: its map entry and heap
// item, measured at 85 to 128 bytes of live heap depending on where the map is in its growth
// (BenchmarkDedupMemoryBytes, server/queuegroup); the upper figure.
const identityBytes = 128

// dedupBudget is the node's count of remembered identities and their memory.
type dedupBudget struct {
	acct  *membudget.Account // nil: memory is not accounted
	share int64              // the bytes of the budget the identities may take
	count atomic.Int64       // identities remembered by every awake group
}

// dedupShare: the identities may take at most this part of the memory budget (a half), so that
// connections always have the rest: a budget the identities had filled would cut the next
// connection that reads a frame.
const dedupShare = 2

// open draws the identities' memory from budget (nil: not accounted).
func (d *dedupBudget) open(budget *membudget.Budget) {
	d.acct = budget.Open(math.MaxInt64/4, nil) // its own bound is share, checked before a reservation
	d.share = budget.Limit() / dedupShare
}

// close gives the account back to the budget.
func (d *dedupBudget) close() { d.acct.Close() }

// dedupGauge reports the identities every awake queue remembers.
func (b *Broker) dedupGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fila", Name: "dedup_identities",
		Help: "Deduplication identities the awake queues remember (each counted in memory_budget at 128 bytes)."},
		func() float64 { return float64(b.dedup.count.Load()) })
}

// RememberedIdentities returns how many deduplication identities the awake queues remember.
func (b *Broker) RememberedIdentities() int64 { return b.dedup.count.Load() }

// reserveIdentity makes room for one more identity in the group, whose Enqueue has pending new
// ones so far: false when the queue's or the node's bound, or the memory budget, has none.
func (a *actor) reserveIdentity(d *Defaults, pending int) bool {
	if uint64(a.st.Remembered()+pending) >= d.DedupMaxPerQueue {
		return false
	}
	b := &a.b.dedup
	if uint64(b.count.Add(1)) > d.DedupMaxIdentities {
		b.count.Add(-1)
		return false
	}
	if b.acct != nil && b.acct.Used()+identityBytes > b.share {
		b.count.Add(-1)
		return false
	}
	if err := b.acct.TryReserve(identityBytes); err != nil {
		b.count.Add(-1)
		return false
	}
	a.dedupHeld++
	return true
}

// countDedup brings what the group is counted for to n identities, what it remembers (0 once
// its state is dropped): after a round, which may have forgotten identities or failed to store
// some, and when the group opens, sleeps or stops. Identities a group reads back from its log
// are owed: they are counted even past the bounds.
func (a *actor) countDedup(n int) {
	delta := n - a.dedupHeld
	if delta == 0 {
		return
	}
	a.b.dedup.count.Add(int64(delta))
	if delta > 0 {
		_ = a.b.dedup.acct.Hold(int64(delta) * identityBytes) // owed: counted past the share; the account's own bound is never reached
	} else {
		a.b.dedup.acct.Release(int64(-delta) * identityBytes)
	}
	a.dedupHeld = n
}

// dedupWindowTooLong refuses a deduplication window above MaxDedupWindowMs.
func dedupWindowTooLong(ms uint64) *Error {
	return errorf(CodeInvalidConfigValue, "dedup_window_ms %d exceeds 7 days (%d)", ms, uint64(MaxDedupWindowMs))
}
