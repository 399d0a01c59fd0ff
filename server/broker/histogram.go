package broker

import (
	"math"
	"sort"
	"sync/atomic"
)

// histogram is one queue's histogram: counts per bucket that a scrape reads without allocating,
// so that summing the thousands of queues without series of their own costs no garbage (the
// client library's histograms are read by building their whole protobuf message). Observe is
// safe for concurrent use; a scrape may see an observation in its bucket before its sum.
type histogram struct {
	bounds []float64       // upper bounds, ascending (shared)
	counts []atomic.Uint64 // per bucket, not cumulative; the last is above every bound
	sum    atomic.Uint64   // float64 bits
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts v in the first bucket whose upper bound is at least v.
func (h *histogram) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.bounds, v)].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// histogramSum adds up histograms with the same buckets.
type histogramSum struct {
	bounds []float64
	counts []uint64 // per bucket, as histogram.counts
	sum    float64
}

func (s *histogramSum) add(h *histogram) {
	if s.counts == nil {
		s.bounds, s.counts = h.bounds, make([]uint64, len(h.counts))
	}
	for i := range h.counts {
		s.counts[i] += h.counts[i].Load()
	}
	s.sum += math.Float64frombits(h.sum.Load())
}

// cumulative returns the count and the cumulative counts by upper bound, as
// prometheus.NewConstHistogram takes them.
func (s *histogramSum) cumulative() (uint64, map[float64]uint64) {
	buckets := make(map[float64]uint64, len(s.bounds))
	var n uint64
	for i, b := range s.bounds {
		n += s.counts[i]
		buckets[b] = n
	}
	return n + s.counts[len(s.bounds)], buckets
}
