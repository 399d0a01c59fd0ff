package broker

import "github.com/prometheus/client_golang/prometheus"

// metrics are the broker's Prometheus series. Gauges (depth, in-flight, …) are collected from
// the actors on scrape by the collector in collector.go.
type metrics struct {
	enqueued, delivered, acked, nacked, deadLettered, expired *prometheus.CounterVec
	commitSeconds                                             prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fila", Name: name, Help: help}, []string{"queue"})
	}
	m := &metrics{
		enqueued:     counter("enqueued_total", "Messages accepted."),
		delivered:    counter("delivered_total", "Messages delivered (leases granted)."),
		acked:        counter("acked_total", "Messages acknowledged."),
		nacked:       counter("nacked_total", "Messages negatively acknowledged."),
		deadLettered: counter("dead_lettered_total", "Messages moved to the dead-letter queue."),
		expired:      counter("lease_expired_total", "Leases that ran out."),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "fila", Name: "storage_commit_seconds", Help: "Latency of storage commits (one per queue round).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.enqueued, m.delivered, m.acked, m.nacked, m.deadLettered, m.expired, m.commitSeconds} {
			reg.MustRegister(c)
		}
	}
	return m
}

// queueMetrics are one queue's counters, resolved once so the hot path does no label lookups.
type queueMetrics struct {
	enqueued, delivered, acked, nacked, deadLettered, expired prometheus.Counter
}

func (m *metrics) forQueue(name string) queueMetrics {
	return queueMetrics{
		enqueued: m.enqueued.WithLabelValues(name), delivered: m.delivered.WithLabelValues(name),
		acked: m.acked.WithLabelValues(name), nacked: m.nacked.WithLabelValues(name),
		deadLettered: m.deadLettered.WithLabelValues(name), expired: m.expired.WithLabelValues(name),
	}
}

// drop removes a deleted queue's series.
func (m *metrics) drop(name string) {
	for _, v := range []*prometheus.CounterVec{m.enqueued, m.delivered, m.acked, m.nacked, m.deadLettered, m.expired} {
		v.DeleteLabelValues(name)
	}
}
