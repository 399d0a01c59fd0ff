package engine

import (
	"fmt"
	"runtime"
	"testing"
)

var benchKeyCounts = []int{1, 10, 1_000, 10_000}

func keyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%d", i)
	}
	return names
}

// fill enqueues n small messages (nil payload) round-robin over keys, in batches of 256.
func fill(b *testing.B, q *Queue, keys []string, first, n int) {
	batch := make([]Message, 0, 256)
	for i := first; i < first+n; i++ {
		batch = append(batch, Message{ID: mid(uint64(i)), FairnessKey: keys[i%len(keys)]})
		if len(batch) == cap(batch) || i == first+n-1 {
			must(b, q.ApplyEnqueue(Enqueue{At: 1, Msgs: batch}))
			batch = batch[:0]
		}
	}
}

// BenchmarkDispatchAck measures Dispatch + Ack over a backlog of b.N messages spread over the
// fairness keys (every key stays active), in batches of 64 deliveries.
func BenchmarkDispatchAck(b *testing.B) {
	for _, nk := range benchKeyCounts {
		b.Run(fmt.Sprintf("keys=%d", nk), func(b *testing.B) {
			keys := keyNames(nk)
			q := newTestQueue(b, benchConfig())
			must(b, q.Subscribe("c", 0))
			fill(b, q, keys, 0, b.N+64*nk)
			dst := make([]Lease, 0, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				dst = q.Dispatch(2, min(64, b.N-done), dst[:0])
				for _, l := range dst {
					if err := q.ApplyAck(Ack{ID: l.ID}); err != nil {
						b.Fatal(err)
					}
				}
				done += len(dst)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkLifecycle measures the whole life of a message — Enqueue, Dispatch, Ack — with a
// standing backlog of 100,000 messages over the fairness keys, in batches of 64.
func BenchmarkLifecycle(b *testing.B) {
	for _, nk := range benchKeyCounts {
		b.Run(fmt.Sprintf("keys=%d", nk), func(b *testing.B) {
			keys := keyNames(nk)
			q := newTestQueue(b, benchConfig())
			must(b, q.Subscribe("c", 0))
			const backlog = 100_000
			fill(b, q, keys, 0, backlog)
			batch := make([]Message, 64)
			dst := make([]Lease, 0, 64)
			next := backlog
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += len(dst) {
				for i := range batch {
					batch[i] = Message{ID: mid(uint64(next)), FairnessKey: keys[next%nk]}
					next++
				}
				if err := q.ApplyEnqueue(Enqueue{At: 2, Msgs: batch}); err != nil {
					b.Fatal(err)
				}
				dst = q.Dispatch(2, len(batch), dst[:0])
				for _, l := range dst {
					if err := q.ApplyAck(Ack{ID: l.ID}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkLifecycleEmpty is BenchmarkLifecycle on an empty queue: each batch of 64 is
// enqueued, delivered and acked before the next, so the queue drains after every batch.
func BenchmarkLifecycleEmpty(b *testing.B) {
	q := newTestQueue(b, benchConfig())
	must(b, q.Subscribe("c", 0))
	batch := make([]Message, 64)
	dst := make([]Lease, 0, 64)
	next := 0
	b.ReportAllocs()
	for done := 0; done < b.N; done += len(dst) {
		for i := range batch {
			batch[i] = Message{ID: mid(uint64(next)), FairnessKey: "k"}
			next++
		}
		if err := q.ApplyEnqueue(Enqueue{At: 2, Msgs: batch}); err != nil {
			b.Fatal(err)
		}
		dst = q.Dispatch(2, len(batch), dst[:0])
		for _, l := range dst {
			if err := q.ApplyAck(Ack{ID: l.ID}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// benchConfig is DefaultConfig with the benchmarks' Allocator, as fila-server's queues have one.
func benchConfig() Config {
	c := DefaultConfig()
	c.Alloc = benchAlloc()
	return c
}

// mappedBy returns the bytes q holds outside the Go heap (alloc.go). (The Allocator's Stats count
// every Queue's, including those of collected queues whose cleanup has not run yet.)
func mappedBy(q *Queue) uint64 {
	var n uint64
	for c, ch := range q.slab.chunks {
		if q.slab.mapped[c] {
			n += uint64(cap(ch) * recSize)
		}
	}
	return n + indexMappedBytes(q.index)
}

// BenchmarkMemoryPerMessage reports the heap (and mapped memory) held per queued message (nil payload, no headers)
// after enqueuing n messages, counting everything the Queue holds: records, ID index, FIFO
// links, key table.
func BenchmarkMemoryPerMessage(b *testing.B) {
	for _, tc := range []struct{ n, keys int }{{1_000_000, 1}, {1_000_000, 10_000}, {10_000_000, 1000}} {
		b.Run(fmt.Sprintf("msgs=%d/keys=%d", tc.n, tc.keys), func(b *testing.B) {
			if tc.n > 1_000_000 && testing.Short() {
				b.Skip("large")
			}
			keys := keyNames(tc.keys)
			var perMsg float64
			for range b.N {
				before := heapInUse()
				q := newTestQueue(b, benchConfig())
				fill(b, q, keys, 0, tc.n)
				after := heapInUse() + mappedBy(q)
				perMsg = float64(after-before) / float64(tc.n)
				runtime.KeepAlive(q)
			}
			b.ReportMetric(perMsg, "B/msg")
			b.ReportMetric(perMsg*float64(tc.n)/(1<<20), "MiB")
		})
	}
}

// The memory budget as a test: a backlog costs well under 100 bytes per message, so ten million
// queued messages fit in under 1 GB.
func TestMemoryPerMessageBound(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("memory measurement")
	}
	const n = 300_000
	keys := keyNames(100)
	before := heapInUse()
	q := newTestQueue(t, benchConfig())
	batch := make([]Message, 0, 256)
	for i := range n {
		batch = append(batch, Message{ID: mid(uint64(i)), FairnessKey: keys[i%len(keys)]})
		if len(batch) == cap(batch) || i == n-1 {
			enqueue(t, q, 1, batch...)
			batch = batch[:0]
		}
	}
	perMsg := float64(heapInUse()+mappedBy(q)-before) / n
	runtime.KeepAlive(q)
	t.Logf("%.1f bytes per queued message", perMsg)
	if perMsg > 90 {
		t.Fatalf("%.1f bytes per queued message, budget 90", perMsg)
	}
}
