package broker

import "github.com/prometheus/client_golang/prometheus"

// metrics are the broker's Prometheus series. Gauges (depth, in-flight, …) are collected from
// the actors on scrape by the collector in collector.go.
type metrics struct {
	enqueued, delivered, acked, nacked, deadLettered, expired, redriven *prometheus.CounterVec
	overBudget                                                          *prometheus.CounterVec
	waitSeconds, processSeconds                                         *prometheus.HistogramVec
	snapshotSeconds                                                     *prometheus.HistogramVec
	commitSeconds                                                       prometheus.Histogram
}

// latencyBuckets span 1 ms to about 4.7 hours in factors of 2.5: queues wait from milliseconds
// (a consumer keeping up) to hours (a backlog), and handlers run as long.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 18)

func newMetrics(reg prometheus.Registerer) *metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fila", Name: name, Help: help}, []string{"queue"})
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "fila", Name: name, Help: help, Buckets: latencyBuckets}, []string{"queue"})
	}
	m := &metrics{
		enqueued:     counter("enqueued_total", "Messages accepted."),
		delivered:    counter("delivered_total", "Messages delivered (leases granted)."),
		acked:        counter("acked_total", "Messages acknowledged."),
		nacked:       counter("nacked_total", "Messages negatively acknowledged."),
		deadLettered: counter("dead_lettered_total", "Messages moved to the dead-letter queue."),
		expired:      counter("lease_expired_total", "Leases that ran out."),
		redriven:     counter("redriven_total", "Messages moved back from the dead-letter queue by Redrive (labelled with the parent queue)."),
		overBudget: counter("script_over_budget_total",
			"Hook calls lua.request_budget_ms left no time for: messages refused ChannelFull or parked without on_enqueue, failures left to the retry policy."),
		waitSeconds: histogram("delivery_wait_seconds",
			"Enqueue to first delivery: time a message waited in the queue before its first lease (includes any enqueue delay)."),
		processSeconds: histogram("ack_latency_seconds", "Delivery to Ack: time a consumer held a message it acknowledged."),
		snapshotSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "fila", Name: "snapshot_seconds",
			Help:    "Snapshots of a queue's state (its log behind them is truncated): how long the queue paused for each.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"queue"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "fila", Name: "storage_commit_seconds", Help: "Latency of storage commits (one per queue round).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.enqueued, m.delivered, m.acked, m.nacked, m.deadLettered, m.expired, m.redriven,
			m.overBudget, m.waitSeconds, m.processSeconds, m.snapshotSeconds, m.commitSeconds} {
			reg.MustRegister(c)
		}
	}
	return m
}

// queueMetrics are one queue's series, resolved once so the hot path does no label lookups.
type queueMetrics struct {
	enqueued, delivered, acked, nacked, deadLettered, expired, redriven prometheus.Counter
	overBudget                                                          prometheus.Counter
	waitSeconds, processSeconds                                         prometheus.Observer
}

func (m *metrics) forQueue(name string) queueMetrics {
	return queueMetrics{
		enqueued: m.enqueued.WithLabelValues(name), delivered: m.delivered.WithLabelValues(name),
		acked: m.acked.WithLabelValues(name), nacked: m.nacked.WithLabelValues(name),
		deadLettered: m.deadLettered.WithLabelValues(name), expired: m.expired.WithLabelValues(name),
		redriven: m.redriven.WithLabelValues(name), overBudget: m.overBudget.WithLabelValues(name),
		waitSeconds: m.waitSeconds.WithLabelValues(name), processSeconds: m.processSeconds.WithLabelValues(name),
	}
}

// drop removes a deleted queue's series.
func (m *metrics) drop(name string) {
	for _, v := range []*prometheus.CounterVec{m.enqueued, m.delivered, m.acked, m.nacked, m.deadLettered, m.expired, m.redriven, m.overBudget} {
		v.DeleteLabelValues(name)
	}
	m.waitSeconds.DeleteLabelValues(name)
	m.processSeconds.DeleteLabelValues(name)
	m.snapshotSeconds.DeleteLabelValues(name)
}

// msSeconds converts a span in Unix milliseconds to seconds (0 if the clock went back).
func msSeconds(from, to int64) float64 { return float64(max(to-from, 0)) / 1000 }
