package raftgroup

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// readCounter is a log store that counts the entries read from it.
type readCounter struct {
	raftstore.LogStableStore
	reads atomic.Int64
}

func (s *readCounter) GetLog(index uint64, l *raft.Log) error {
	s.reads.Add(1)
	return s.LogStableStore.GetLog(index, l)
}

func entries(lo, hi, term uint64, size int) []*raft.Log {
	var out []*raft.Log
	for i := lo; i <= hi; i++ {
		data := make([]byte, size)
		copy(data, fmt.Sprintf("%d/%d", i, term))
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data})
	}
	return out
}

// wantEntry reads index through c and checks it is the entry of term stored there, and whether
// the store under c was read for it.
func wantEntry(t *testing.T, c *logCache, under *readCounter, index, term uint64, fromStore bool) {
	t.Helper()
	before := under.reads.Load()
	var l raft.Log
	if err := c.GetLog(index, &l); err != nil {
		t.Fatalf("entry %d: %v", index, err)
	}
	want := fmt.Sprintf("%d/%d", index, term)
	if l.Index != index || l.Term != term || string(l.Data[:len(want)]) != want {
		t.Fatalf("entry %d: got index %d term %d data %q, want term %d data %q", index, l.Index, l.Term,
			l.Data[:len(want)], term, want)
	}
	if read := under.reads.Load() != before; read != fromStore {
		t.Fatalf("entry %d: read from the store %v, want %v", index, read, fromStore)
	}
}

func wantHeld(t *testing.T, c *logCache, first, last uint64) {
	t.Helper()
	f, l, n, _ := c.held()
	if f != first || l != last || (first != 0 && n != int(last-first+1)) {
		t.Fatalf("cache holds %d..%d (%d entries), want %d..%d", f, l, n, first, last)
	}
}

func newTestCache(maxEntries, maxBytes int) (*logCache, *readCounter) {
	under := &readCounter{LogStableStore: raft.NewInmemStore()}
	return newLogCache(under, maxEntries, maxBytes, &cacheBudget{max: 1 << 40}), under
}

func TestLogCacheServesTheLatestEntriesWithinItsBounds(t *testing.T) {
	c, under := newTestCache(4, 1<<20)
	if err := c.StoreLogs(entries(1, 10, 1, 100)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 7, 10)
	for i := uint64(7); i <= 10; i++ {
		wantEntry(t, c, under, i, 1, false)
	}
	for i := uint64(1); i <= 6; i++ { // evicted: read from the store
		wantEntry(t, c, under, i, 1, true)
	}
	var l raft.Log
	if err := c.GetLog(11, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry past the log: %v, want ErrLogNotFound", err)
	}

	// Bounded in bytes: 3 entries of 100 bytes (and their bookkeeping) fit in 600, 5 do not.
	c, under = newTestCache(100, 3*(100+logEntryCost))
	for i := uint64(1); i <= 5; i++ {
		if err := c.StoreLog(entries(i, i, 1, 100)[0]); err != nil {
			t.Fatal(err)
		}
	}
	wantHeld(t, c, 3, 5)
	if _, _, _, bytes := c.held(); bytes != 3*(100+logEntryCost) {
		t.Fatalf("cache counts %d bytes, want %d", bytes, 3*(100+logEntryCost))
	}
	wantEntry(t, c, under, 2, 1, true)
	wantEntry(t, c, under, 3, 1, false)

	// An entry larger than the bound is still held, alone.
	if err := c.StoreLogs(entries(6, 6, 1, 10_000)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 6, 6)

	// A long run keeps the window within its bound, its array from growing without end.
	c, under = newTestCache(8, 1<<20)
	for i := uint64(1); i <= 1000; i++ {
		if err := c.StoreLogs(entries(i, i, 1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	wantHeld(t, c, 993, 1000)
	if cap(c.ents) > 64 {
		t.Fatalf("the window's array grew to %d entries for a bound of 8", cap(c.ents))
	}
	wantEntry(t, c, under, 993, 1, false)
	wantEntry(t, c, under, 992, 1, true)
}

func TestLogCacheForgetsWhatIsDeletedOrReplaced(t *testing.T) {
	c, under := newTestCache(100, 1<<20)
	if err := c.StoreLogs(entries(1, 20, 1, 10)); err != nil {
		t.Fatal(err)
	}

	// Compaction behind a snapshot: the oldest entries go, from the cache and the store.
	if err := c.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 6, 20)
	var l raft.Log
	if err := c.GetLog(5, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry 5: %v, want ErrLogNotFound", err)
	}

	// A follower's conflicting suffix: deleted, then the leader's entries of term 2 stored there.
	if err := c.DeleteRange(15, 20); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 6, 14)
	if err := c.StoreLogs(entries(15, 17, 2, 10)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 6, 17)
	wantEntry(t, c, under, 14, 1, false)
	wantEntry(t, c, under, 15, 2, false)

	// An entry stored over one the cache holds replaces it and ends the window there.
	if err := c.StoreLogs(entries(10, 10, 3, 10)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 6, 10)
	wantEntry(t, c, under, 10, 3, false)
	wantEntry(t, c, under, 11, 1, true) // the store's own, still there

	// Entries that do not follow the window start a new one.
	if err := c.StoreLogs(entries(40, 41, 3, 10)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 40, 41)
	wantEntry(t, c, under, 9, 1, true)

	// A range covering the window empties it; one outside it leaves it.
	if err := c.DeleteRange(1, 39); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 40, 41)
	if err := c.DeleteRange(30, 100); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 0, 0)
	if err := c.GetLog(40, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry 40: %v, want ErrLogNotFound", err)
	}
}

func TestLogCacheHoldsNothingAfterAFailedWrite(t *testing.T) {
	under := &readCounter{LogStableStore: raft.NewInmemStore()}
	faulty := raftstore.NewFaulty(under)
	c := newLogCache(faulty, 100, 1<<20, &cacheBudget{max: 1 << 40})
	if err := c.StoreLogs(entries(1, 5, 1, 10)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 1, 5)
	// The store took the write but reported it failed: its outcome is unknown to the caller.
	faulty.FailNextAfterStoring(1, errors.New("fsync failed"))
	if err := c.StoreLogs(entries(6, 6, 1, 10)); err == nil {
		t.Fatal("the failed write succeeded")
	}
	wantHeld(t, c, 0, 0)
	wantEntry(t, c, under, 5, 1, true)
	if err := c.StoreLogs(entries(6, 7, 1, 10)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, c, 6, 7)
}

// A group with peers sends its followers, and they apply, the entries they store without reading
// them back from the store; a group without peers has no cache. Shutdown lets the entries go.
func TestGroupWithPeersReadsRecentEntriesFromMemory(t *testing.T) {
	var trans []*raft.InmemTransport
	var peers []raft.Server
	for i := range 3 {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprint(i + 1)))
		trans = append(trans, tr)
		peers = append(peers, raft.Server{ID: raft.ServerID(addr), Address: addr})
	}
	for _, a := range trans {
		for _, b := range trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	var groups []*Group
	var stores []*readCounter
	for i, tr := range trans {
		s := &readCounter{LogStableStore: raft.NewInmemStore()}
		g, err := Open(Config{Store: s, Snapshots: raft.NewInmemSnapshotStore(), LocalID: peers[i].ID,
			Transport: tr, Peers: peers, HeartbeatTimeout: time.Second, Logger: hclog.NewNullLogger()}, &countFSM{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Shutdown() })
		groups, stores = append(groups, g), append(stores, s)
	}
	// Settle: a leader, and an entry of its term applied everywhere (the entries before it were
	// stored by the bootstrap, not through the cache).
	var leader *Group
	deadline := time.Now().Add(30 * time.Second)
	for leader == nil {
		for _, g := range groups {
			if g.Leader() {
				leader = g
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader after 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	propose := func(n int) uint64 {
		t.Helper()
		var last raft.ApplyFuture
		for i := range n {
			last = leader.Propose([]byte(fmt.Sprint("command ", i)))
		}
		if err := last.Error(); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if err := g.AwaitApplied(last.Index(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		return last.Index()
	}
	propose(1)
	for _, s := range stores {
		s.reads.Store(0)
	}
	last := propose(300)
	for i, s := range stores {
		if n := s.reads.Load(); n != 0 {
			t.Errorf("node %d read %d entries from its store", i+1, n)
		}
		if _, l, _, _ := groups[i].cache.held(); l != last {
			t.Errorf("node %d caches up to entry %d, want %d", i+1, l, last)
		}
	}
	leader.Shutdown()
	if _, _, n, _ := leader.cache.held(); n != 0 {
		t.Errorf("a group shut down still holds %d entries", n)
	}

	single, err := Open(Config{Store: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore(),
		Logger: hclog.NewNullLogger()}, &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Shutdown()
	if single.cache != nil {
		t.Error("a group without peers has a log cache")
	}
}

// The caches of a process share a budget: over it, a cache that stores entries keeps its share.
func TestLogCachesShareTheNodesBudget(t *testing.T) {
	cost := 100 + logEntryCost
	budget := &cacheBudget{max: int64(10 * cost)}
	a := newLogCache(raft.NewInmemStore(), 1000, 1<<20, budget)
	b := newLogCache(raft.NewInmemStore(), 1000, 1<<20, budget)
	wantBudget := func(bytes, groups int64) {
		t.Helper()
		if got, gotGroups := budget.bytes.Load(), budget.groups.Load(); got != bytes || gotGroups != groups {
			t.Fatalf("the budget counts %d bytes in %d caches, want %d in %d", got, gotGroups, bytes, groups)
		}
	}
	if err := a.StoreLogs(entries(1, 10, 1, 100)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, a, 1, 10) // the budget, not over it
	wantBudget(int64(10*cost), 1)
	if err := b.StoreLogs(entries(1, 4, 1, 100)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, b, 1, 4) // within its share, half the budget
	if err := b.StoreLogs(entries(5, 8, 1, 100)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, b, 4, 8)
	wantBudget(int64(15*cost), 2)
	if err := a.StoreLogs(entries(11, 11, 1, 100)); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, a, 7, 11)
	wantBudget(int64(10*cost), 2)
	if err := b.DeleteRange(1, 8); err != nil {
		t.Fatal(err)
	}
	wantBudget(int64(5*cost), 1)
	a.reset()
	wantBudget(0, 0)
}
