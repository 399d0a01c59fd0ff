package broker

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the broker's Prometheus series. The per-queue ones (counters and histograms here,
// gauges read from the actors) are reported by the collector in collector.go, which gives at
// most CollectorOptions.MaxQueues queues series of their own and sums the rest; only the
// server-wide ones are registered with Options.Registry.
type metrics struct {
	enqueued, delivered, acked, nacked, deadLettered, expired, redriven *prometheus.CounterVec
	overBudget                                                          *prometheus.CounterVec
	commitSeconds                                                       prometheus.Histogram

	mu     sync.Mutex
	queues map[string]queueMetrics // every queue's series since its actor first ran, by name
}

// histogramSpec is one of each queue's histograms.
type histogramSpec struct {
	name, help string
	buckets    []float64
}

// The per-queue histograms, in the order of queueMetrics.histograms. latencyBuckets span 1 ms
// to about 4.7 hours in factors of 2.5: queues wait from milliseconds (a consumer keeping up) to
// hours (a backlog), and handlers run as long.
var (
	latencyBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 18)
	histogramSpecs = []histogramSpec{
		{"fila_delivery_wait_seconds", "Enqueue to first delivery: time a message waited in the queue before its first lease (includes any enqueue delay).", latencyBuckets},
		{"fila_ack_latency_seconds", "Delivery to Ack: time a consumer held a message it acknowledged.", latencyBuckets},
		{"fila_snapshot_seconds", "Snapshots of a queue's state (its log behind them is truncated): how long the queue paused for each.",
			prometheus.ExponentialBuckets(0.001, 4, 10)},
	}
)

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
		redriven:     counter("redriven_total", "Messages moved back from the dead-letter queue by Redrive (labelled with the parent queue)."),
		overBudget: counter("script_over_budget_total",
			"Hook calls lua.request_budget_ms left no time for: messages refused ChannelFull or parked without on_enqueue, failures left to the retry policy."),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "fila", Name: "storage_commit_seconds", Help: "Latency of storage commits (one per queue round).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		queues: map[string]queueMetrics{},
	}
	if reg != nil {
		reg.MustRegister(m.commitSeconds)
	}
	return m
}

// queueMetrics are one queue's series, resolved once so the hot path does no label lookups.
type queueMetrics struct {
	enqueued, delivered, acked, nacked, deadLettered, expired, redriven prometheus.Counter
	overBudget                                                          prometheus.Counter
	waitSeconds, processSeconds                                         *histogram
	snapshotSeconds                                                     *histogram // nil for a dead-letter queue
}

// counters are q's counters, in the order of metrics.counterVecs.
func (q queueMetrics) counters() []prometheus.Counter {
	return []prometheus.Counter{q.enqueued, q.delivered, q.acked, q.nacked, q.deadLettered, q.expired, q.redriven, q.overBudget}
}

// histograms are q's histograms, in the order of histogramSpecs (snapshotSeconds nil for a
// dead-letter queue).
func (q queueMetrics) histograms() [3]*histogram {
	return [3]*histogram{q.waitSeconds, q.processSeconds, q.snapshotSeconds}
}

func (m *metrics) counterVecs() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{m.enqueued, m.delivered, m.acked, m.nacked, m.deadLettered, m.expired, m.redriven, m.overBudget}
}

// forQueue returns queue name's series, making them on the first call.
func (m *metrics) forQueue(name string) queueMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q, ok := m.queues[name]; ok {
		return q
	}
	q := queueMetrics{
		enqueued: m.enqueued.WithLabelValues(name), delivered: m.delivered.WithLabelValues(name),
		acked: m.acked.WithLabelValues(name), nacked: m.nacked.WithLabelValues(name),
		deadLettered: m.deadLettered.WithLabelValues(name), expired: m.expired.WithLabelValues(name),
		redriven: m.redriven.WithLabelValues(name), overBudget: m.overBudget.WithLabelValues(name),
		waitSeconds: newHistogram(histogramSpecs[0].buckets), processSeconds: newHistogram(histogramSpecs[1].buckets),
	}
	if !strings.HasSuffix(name, dlqSuffix) {
		q.snapshotSeconds = newHistogram(histogramSpecs[2].buckets)
	}
	m.queues[name] = q
	return q
}

// series returns queue name's series, if its actor has run.
func (m *metrics) series(name string) (queueMetrics, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q, ok := m.queues[name]
	return q, ok
}

// drop removes a deleted queue's series.
func (m *metrics) drop(name string) {
	m.mu.Lock()
	delete(m.queues, name)
	m.mu.Unlock()
	for _, v := range m.counterVecs() {
		v.DeleteLabelValues(name)
	}
}

// msSeconds converts a span in Unix milliseconds to seconds (0 if the clock went back).
func msSeconds(from, to int64) float64 { return float64(max(to-from, 0)) / 1000 }
