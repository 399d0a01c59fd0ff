//go:build unix

package raftstore

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestIdleCost measures what idle single-node raft groups cost: it starts
// FILA_RAFT_IDLE_GROUPS of them on one database (each its own prefix, an InmemTransport and an
// InmemSnapshotStore, raft.DefaultConfig), waits until all lead, and reports goroutines, heap
// and stack in use, and CPU over FILA_RAFT_IDLE_SECONDS (default 10) idle seconds, per group.
// FILA_RAFT_IDLE_TIMEOUT (e.g. 5s) sets HeartbeatTimeout, ElectionTimeout and
// LeaderLeaseTimeout instead of their defaults. It is skipped unless FILA_RAFT_IDLE_GROUPS is set:
//
//	FILA_RAFT_IDLE_GROUPS=1000 go test -run TestIdleCost -v ./server/raftstore/
func TestIdleCost(t *testing.T) {
	groups, _ := strconv.Atoi(os.Getenv("FILA_RAFT_IDLE_GROUPS"))
	if groups <= 0 || testing.Short() {
		t.Skip("set FILA_RAFT_IDLE_GROUPS=1000 to measure idle raft groups")
	}
	idle := 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("FILA_RAFT_IDLE_SECONDS")); err == nil && s > 0 {
		idle = time.Duration(s) * time.Second
	}
	var timeout time.Duration
	if v := os.Getenv("FILA_RAFT_IDLE_TIMEOUT"); v != "" {
		var err error
		if timeout, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}

	db := openDB(t, t.TempDir())
	var calls storeCalls
	base := sampleRuntime()
	start := time.Now()
	nodes := make([]*node, groups)
	for g := range nodes {
		conf := raft.DefaultConfig()
		conf.LocalID = raft.ServerID(fmt.Sprint("n", g))
		conf.LogOutput, conf.LogLevel = io.Discard, "ERROR"
		if timeout > 0 {
			conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = timeout, timeout, timeout
		}
		s, err := New(Pebble(db), fmt.Appendf(nil, "r/q%06d\x00", g), Options{})
		must(t, err)
		nodes[g] = launchNode(t, conf, &countedStore{Store: s, c: &calls}, raft.NewInmemSnapshotStore())
	}
	launched := time.Since(start)
	for _, n := range nodes {
		waitLeader(t, n.raft, time.Minute)
	}
	t.Logf("%d groups: launched in %v, all leading after %v", groups, launched.Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond))
	defer func() {
		for _, n := range nodes {
			n.stop(t)
		}
	}()

	time.Sleep(2 * time.Second) // let the leaders' no-ops apply and the first timers fire
	loaded := sampleRuntime()
	syncs0, calls0 := walSyncs(t, db), calls.snapshot()
	cpu0, wall0 := cpuTime(t), time.Now()
	time.Sleep(idle)
	cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
	syncs, idleCalls := walSyncs(t, db)-syncs0, minus(calls.snapshot(), calls0)

	per := func(v float64) float64 { return v / float64(groups) }
	t.Logf("goroutines: %d before, %d with the groups: %.2f per group", base.goroutines, loaded.goroutines,
		per(float64(loaded.goroutines-base.goroutines)))
	t.Logf("heap+stack in use: %.1f MiB before, %.1f MiB with the groups: %.1f KiB per group "+
		"(heap %.1f KiB, stack %.1f KiB)", mib(base.heap+base.stack), mib(loaded.heap+loaded.stack),
		per(float64(loaded.heap+loaded.stack-base.heap-base.stack))/1024,
		per(float64(loaded.heap-base.heap))/1024, per(float64(loaded.stack-base.stack))/1024)
	t.Logf("idle CPU over %v: %v (%.2f%% of one core), %.1f µs per group per second; %d WAL fsyncs",
		wall.Round(time.Millisecond), cpu.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(),
		per(float64(cpu.Microseconds()))/wall.Seconds(), syncs)
	t.Logf("store calls while idle, per group per second: FirstIndex %.3f, LastIndex %.3f, GetLog %.3f, "+
		"StoreLogs %.3f", per(float64(idleCalls[0]))/wall.Seconds(), per(float64(idleCalls[1]))/wall.Seconds(),
		per(float64(idleCalls[2]))/wall.Seconds(), per(float64(idleCalls[3]))/wall.Seconds())
}

// storeCalls counts the LogStore calls of every countedStore sharing it.
type storeCalls struct{ first, last, get, store atomic.Int64 }

// callCounts holds FirstIndex, LastIndex, GetLog and StoreLogs calls, in that order.
type callCounts [4]int64

func (c *storeCalls) snapshot() callCounts {
	return callCounts{c.first.Load(), c.last.Load(), c.get.Load(), c.store.Load()}
}

func minus(a, b callCounts) callCounts {
	for i := range a {
		a[i] -= b[i]
	}
	return a
}

// countedStore is a Store that counts raft's calls to it.
type countedStore struct {
	*Store
	c *storeCalls
}

func (s *countedStore) FirstIndex() (uint64, error) { s.c.first.Add(1); return s.Store.FirstIndex() }
func (s *countedStore) LastIndex() (uint64, error)  { s.c.last.Add(1); return s.Store.LastIndex() }
func (s *countedStore) GetLog(i uint64, l *raft.Log) error {
	s.c.get.Add(1)
	return s.Store.GetLog(i, l)
}
func (s *countedStore) StoreLogs(logs []*raft.Log) error {
	s.c.store.Add(1)
	return s.Store.StoreLogs(logs)
}
func (s *countedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

type runtimeSample struct {
	goroutines  int
	heap, stack uint64
}

func sampleRuntime() runtimeSample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtimeSample{goroutines: runtime.NumGoroutine(), heap: m.HeapInuse, stack: m.StackInuse}
}

// cpuTime returns the user and system CPU time the process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
