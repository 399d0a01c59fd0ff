package raftstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"
)

// walSyncs returns how many WAL fsyncs the database has done.
func walSyncs(tb testing.TB, db *pebble.DB) uint64 {
	var m dto.Metric
	if err := db.Metrics().LogWriter.FsyncLatency.Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// runSpread runs b.N calls of op spread over n goroutines; op gets its goroutine's number.
func runSpread(b *testing.B, n int, op func(g int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(g); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkStoreLogs stores one 1 KB entry per call, from 1, 8 and 32 goroutines that each own a
// group of one shared database. ns/op is wall time per call over all goroutines; fsyncs/op
// shows how many calls share one WAL fsync.
func BenchmarkStoreLogs(b *testing.B) {
	for _, tc := range []struct {
		groups int
		opts   Options
	}{{1, Options{}}, {8, Options{}}, {32, Options{}}, {1, Options{NoSync: true}}, {8, Options{NoSync: true}}} {
		mode := "sync"
		if tc.opts.NoSync {
			mode = "nosync"
		}
		b.Run(fmt.Sprintf("%s/groups=%d", mode, tc.groups), func(b *testing.B) {
			db := openDB(b, b.TempDir())
			stores := make([]*Store, tc.groups)
			next := make([]uint64, tc.groups)
			for g := range stores {
				s, err := New(Pebble(db), fmt.Appendf(nil, "r/q%d\x00", g), tc.opts)
				if err != nil {
					b.Fatal(err)
				}
				stores[g] = s
			}
			payload := make([]byte, 1024)
			syncs := walSyncs(b, db)
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			runSpread(b, tc.groups, func(g int) error {
				next[g]++
				return stores[g].StoreLogs([]*raft.Log{{Index: next[g], Term: 1, Data: payload,
					AppendedAt: time.Now()}})
			})
			b.StopTimer()
			b.ReportMetric(float64(walSyncs(b, db)-syncs)/float64(b.N), "fsyncs/op")
		})
	}
}

// BenchmarkRaftApply applies 1 KB commands to single-node raft groups on one database and waits
// for each: callers=N is N goroutines on one group (raft batches their entries), groups=N is
// one caller on each of N groups (Pebble shares their fsyncs).
func BenchmarkRaftApply(b *testing.B) {
	for _, tc := range []struct {
		name            string
		groups, callers int
		noSync          bool
	}{
		{"sync/callers=1", 1, 1, false},
		{"sync/callers=8", 1, 8, false},
		{"sync/groups=8", 8, 8, false},
		{"nosync/callers=1", 1, 1, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := openDB(b, b.TempDir())
			nodes := make([]*node, tc.groups)
			for g := range nodes {
				s, err := New(Pebble(db), fmt.Appendf(nil, "r/q%d\x00", g), Options{NoSync: tc.noSync})
				if err != nil {
					b.Fatal(err)
				}
				nodes[g] = startNode(b, fastConfig(fmt.Sprint("n", g)), s, raft.NewInmemSnapshotStore())
				defer nodes[g].stop(b)
			}
			payload := make([]byte, 1024)
			syncs := walSyncs(b, db)
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			runSpread(b, tc.callers, func(g int) error {
				return nodes[g%tc.groups].raft.Apply(payload, 0).Error()
			})
			b.StopTimer()
			b.ReportMetric(float64(walSyncs(b, db)-syncs)/float64(b.N), "fsyncs/op")
		})
	}
}
