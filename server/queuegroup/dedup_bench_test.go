package queuegroup

import (
	"encoding/binary"
	"runtime"
	"strconv"
	"testing"

	"github.com/filamq/fila/server/engine"
)

// BenchmarkDedupMemoryBytes measures the live heap one remembered identity costs (its map entry
// and heap item), at sizes where the map has just grown and where it is about to: the broker
// counts each identity in the memory budget at the largest figure (identityBytes in
// server/broker). Run with -benchtime 1x.
func BenchmarkDedupMemoryBytes(b *testing.B) {
	for _, n := range []int{520_000, 900_000, 1_000_000, 1_900_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var perIdentity float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				d := newDedupMemory()
				for i := range n {
					var id Identity
					binary.BigEndian.PutUint64(id[:], uint64(i)*0x9E3779B97F4A7C15)
					d.remember(id, engine.MsgID{}, int64(i))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perIdentity = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(&d)
			}
			b.ReportMetric(perIdentity, "B/identity")
		})
	}
}
