package broker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"pgregory.net/rapid"
)

// A queue's histogram reports what the client library's histogram with the same buckets reports
// for the same observations: count, sum and every cumulative bucket (a value on a bound counts
// in that bound's bucket).
func TestHistogramMatchesTheClientLibrarys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bounds := latencyBuckets
		ours := newHistogram(bounds)
		theirs := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: bounds})
		for _, v := range rapid.SliceOf(rapid.OneOf(rapid.Float64Range(0, 20_000), rapid.SampledFrom(bounds))).Draw(t, "values") {
			ours.Observe(v)
			theirs.Observe(v)
		}
		var sum histogramSum
		sum.add(ours)
		count, buckets := sum.cumulative()
		var m dto.Metric
		if err := prometheus.MustNewConstHistogram(prometheus.NewDesc("h", "h", nil, nil), count, sum.sum, buckets).Write(&m); err != nil {
			t.Fatal(err)
		}
		var want dto.Metric
		if err := theirs.Write(&want); err != nil {
			t.Fatal(err)
		}
		g, w := m.GetHistogram(), want.GetHistogram()
		if g.GetSampleCount() != w.GetSampleCount() || g.GetSampleSum() != w.GetSampleSum() {
			t.Fatalf("count %d sum %g, want %d and %g", g.GetSampleCount(), g.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
		}
		cum := func(h *dto.Histogram) (out []uint64) {
			for _, b := range h.GetBucket() {
				out = append(out, b.GetCumulativeCount())
			}
			return out
		}
		if !cmp.Equal(cum(g), cum(w)) {
			t.Fatalf("buckets %v, want %v", cum(g), cum(w))
		}
	})
}
