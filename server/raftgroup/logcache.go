package raftgroup

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// A group with peers reads back every entry it stores: its leader to send it to each follower
// (raft's setupAppendEntries, and setPreviousLog for the term of the entry before each batch),
// a follower to apply it. A queue group's store keeps the message bodies apart from the entries
// (server/storage's bodyLog) and joins them back on every read, which cost the leader of a
// publishing 3-node cluster half its CPU. logCache keeps the latest entries as raft stored them,
// so that those reads are served from memory; an entry not held any more (evicted, or never
// stored through this cache) is read from the store as before.
//
// The entries are kept as raft handed them to StoreLogs: raft does not change an entry once it
// is stored, the stores do not change the entries they are given (bodyLog splits a copy), a
// leader's entry data is the proposal's (the broker builds a fresh one each round, nothing
// writes to it after) and a follower's is decoded from a frame of its own (nodelink clones
// each frame it receives). A read copies the Log struct; its byte slices are shared, as raft's
// own LogCache shares them, and nobody writes to them.

// Bounds of a group's log cache: the entries it holds and their data's size. A follower that lags
// further behind than this is sent entries read from the store. The caches of every group of the
// process share a budget besides (logCacheNodeBytes): while they hold more, a group that stores
// entries keeps at most its share of it (the budget over the groups holding entries), so a node
// with a thousand busy queues holds about the budget, not a thousand times 4 MiB.
const (
	logCacheEntries   = 1024
	logCacheBytes     = 4 << 20
	logCacheNodeBytes = 256 << 20
	logEntryCost      = 64 // bookkeeping counted for each entry on top of its data
)

// cacheBudget is what the log caches of a process hold together.
type cacheBudget struct {
	max    int64
	bytes  atomic.Int64 // held by every cache
	groups atomic.Int64 // caches holding an entry
}

// nodeBudget is shared by every group of the process.
var nodeBudget = &cacheBudget{max: logCacheNodeBytes}

// share is what one cache may keep while the caches hold more than the budget (0: no limit).
func (b *cacheBudget) share() int {
	if b.bytes.Load() <= b.max {
		return 0
	}
	return int(b.max / max(b.groups.Load(), 1))
}

// logCache is a group's log store with its latest entries held in memory: a window of
// consecutive indexes, first to first+len(ents)-1, bounded by maxEntries and maxBytes (the
// oldest entries leave first). Its writes go to the store first and change the window only once
// the store has them; a failed write empties it.
type logCache struct {
	raftstore.LogStableStore
	lr         LightReader // the store's, nil if it has none
	maxEntries int
	maxBytes   int
	budget     *cacheBudget

	mu    sync.Mutex
	first uint64     // the index of ents[head]; meaningless while the window is empty
	ents  []raft.Log // ents[head:] is the window
	head  int
	bytes int // the window's cost
	// counted is what the budget holds of this cache: its cost, and whether it holds entries.
	counted      int
	countedGroup bool
}

// LightReader as well: raft's restore scan reads through the cache.
var _ LightReader = (*logCache)(nil)

func newLogCache(store raftstore.LogStableStore, maxEntries, maxBytes int, budget *cacheBudget) *logCache {
	lr, _ := store.(LightReader)
	return &logCache{LogStableStore: store, lr: lr, maxEntries: maxEntries, maxBytes: maxBytes, budget: budget}
}

// settle tells the budget what the cache holds now. The caller holds mu.
func (c *logCache) settle() {
	if d := c.bytes - c.counted; d != 0 {
		c.budget.bytes.Add(int64(d))
		c.counted = c.bytes
	}
	if holds := len(c.ents) > c.head; holds != c.countedGroup {
		if holds {
			c.budget.groups.Add(1)
		} else {
			c.budget.groups.Add(-1)
		}
		c.countedGroup = holds
	}
}

// cached copies the entry at index into l if the window holds it.
func (c *logCache) cached(index uint64, l *raft.Log) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(len(c.ents) - c.head)
	if n == 0 || index < c.first || index-c.first >= n {
		return false
	}
	*l = c.ents[c.head+int(index-c.first)]
	return true
}

func (c *logCache) GetLog(index uint64, l *raft.Log) error {
	if c.cached(index, l) {
		return nil
	}
	return c.LogStableStore.GetLog(index, l)
}

// GetLogLight serves a cached entry whole (it holds more than a light read needs).
func (c *logCache) GetLogLight(index uint64, l *raft.Log) error {
	if c.cached(index, l) {
		return nil
	}
	if c.lr != nil {
		return c.lr.GetLogLight(index, l)
	}
	return c.LogStableStore.GetLog(index, l)
}

func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.LogStableStore.StoreLogs(logs); err != nil {
		// The store may or may not hold the entries now, and may have replaced older ones at
		// their indexes: hold nothing the store might not.
		c.reset()
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		c.put(l)
	}
	c.settle()
	if share := c.budget.share(); share > 0 {
		for len(c.ents)-c.head > 1 && c.bytes > share {
			c.dropOldest()
		}
		c.settle()
	}
	return nil
}

// put adds an entry the store now holds. An entry at an index the window holds replaces it and
// ends the window there (the store's later entries are raft's to delete or replace: a follower
// deletes a conflicting suffix before storing the leader's); one that does not follow the window
// starts a new one.
func (c *logCache) put(l *raft.Log) {
	n := uint64(len(c.ents) - c.head)
	switch {
	case n > 0 && l.Index >= c.first && l.Index-c.first < n:
		c.truncateFrom(l.Index)
	case n == 0 || l.Index != c.first+n:
		c.clear()
	}
	if len(c.ents) == c.head {
		c.first = l.Index
	}
	if c.head > 0 && len(c.ents) == cap(c.ents) {
		// Move the window to the front of its array rather than growing it.
		k := copy(c.ents, c.ents[c.head:])
		clear(c.ents[k:])
		c.ents, c.head = c.ents[:k], 0
	}
	c.ents = append(c.ents, *l)
	c.bytes += entryCost(l)
	for len(c.ents)-c.head > 1 && (len(c.ents)-c.head > c.maxEntries || c.bytes > c.maxBytes) {
		c.dropOldest()
	}
}

// dropOldest evicts the window's first entry.
func (c *logCache) dropOldest() {
	c.bytes -= entryCost(&c.ents[c.head])
	c.ents[c.head] = raft.Log{} // let its data go
	c.head++
	c.first++
	if c.head == len(c.ents) {
		c.clear()
	}
}

// truncateFrom drops the window's entries from index on.
func (c *logCache) truncateFrom(index uint64) {
	keep := c.head + int(index-c.first)
	for i := keep; i < len(c.ents); i++ {
		c.bytes -= entryCost(&c.ents[i])
	}
	clear(c.ents[keep:])
	c.ents = c.ents[:keep]
	if keep == c.head {
		c.clear()
	}
}

// clear empties the window (keeping its array).
func (c *logCache) clear() {
	clear(c.ents)
	c.ents, c.head, c.bytes = c.ents[:0], 0, 0
}

// reset empties the window and lets its array go.
func (c *logCache) reset() {
	c.mu.Lock()
	c.ents, c.head, c.bytes = nil, 0, 0
	c.settle()
	c.mu.Unlock()
}

// DeleteRange forgets the entries from min to max before the store deletes them, so that no
// read finds in the cache an entry the store no longer holds.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	if n := uint64(len(c.ents) - c.head); n > 0 && min <= max {
		last := c.first + n - 1
		switch {
		case max < c.first || min > last:
			// none of the window's
		case min <= c.first && max >= last:
			c.clear()
		case min <= c.first: // the window's oldest entries (raft compacting behind a snapshot)
			for c.first <= max {
				c.dropOldest()
			}
		case max >= last: // its newest (a follower's conflicting suffix)
			c.truncateFrom(min)
		default: // a hole in the middle: raft never asks for one
			c.clear()
		}
		c.settle()
	}
	c.mu.Unlock()
	return c.LogStableStore.DeleteRange(min, max)
}

// held reports the window's extent and cost, for tests.
func (c *logCache) held() (first, last uint64, entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.ents) - c.head
	if n == 0 {
		return 0, 0, 0, 0
	}
	return c.first, c.first + uint64(n) - 1, n, c.bytes
}

func entryCost(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + logEntryCost }
