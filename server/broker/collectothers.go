package broker

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/filamq/fila/server/engine"
)

// emitOthers sends the series that sum the queues without series of their own, labelled
// OtherQueues: gauges, counters and histograms summed, the age of the oldest ready message the
// largest. The top fairness keys are per queue and have no sum.
func (c *collector) emitOthers(ch chan<- prometheus.Metric, rows []queueRow, now int64) {
	var s engine.Stats
	var age, bytes float64
	var ordered, hasBytes bool
	counters := make([]float64, len(c.counters))
	hists := make([]histogramSum, len(c.histograms))
	for i := range rows {
		r := &rows[i]
		s.Depth += r.s.Depth
		s.InFlight += r.s.InFlight
		s.Delayed += r.s.Delayed
		s.ActiveFairnessKeys += r.s.ActiveFairnessKeys
		s.ActiveConsumers += r.s.ActiveConsumers
		s.OrderingGroups += r.s.OrderingGroups
		s.BlockedGroups += r.s.BlockedGroups
		ordered = ordered || r.ordered
		if r.hasOldest {
			age = max(age, msSeconds(r.oldest, now))
		}
		if r.hasBytes {
			bytes, hasBytes = bytes+r.bytes, true
		}
		if !r.hasMetrics {
			continue
		}
		for j, x := range r.m.counters() {
			counters[j] += counterValue(x)
		}
		for j, h := range r.m.histograms() {
			if h != nil {
				hists[j].add(h)
			}
		}
	}
	g := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, OtherQueues)
	}
	g(c.depth, float64(s.Depth))
	g(c.inFlight, float64(s.InFlight))
	g(c.delayed, float64(s.Delayed))
	g(c.keys, float64(s.ActiveFairnessKeys))
	g(c.consumers, float64(s.ActiveConsumers))
	g(c.oldestAge, age)
	if ordered {
		g(c.groups, float64(s.OrderingGroups))
		g(c.blockedGroups, float64(s.BlockedGroups))
	}
	if hasBytes {
		g(c.storedBytes, bytes)
	}
	for j, v := range counters {
		ch <- prometheus.MustNewConstMetric(c.counters[j], prometheus.CounterValue, v, OtherQueues)
	}
	for j, h := range hists {
		if h.counts != nil {
			count, buckets := h.cumulative()
			ch <- prometheus.MustNewConstHistogram(c.histograms[j], count, h.sum, buckets, OtherQueues)
		}
	}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
