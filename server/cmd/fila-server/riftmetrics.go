package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/rift/service"
)

// riftCollector exports Rift's counters on /metrics, read from the service at scrape time so
// that the publish path keeps no Prometheus state of its own.
type riftCollector struct {
	svc *service.Service

	connections, subscriptions, published, delivered, slow      *prometheus.Desc
	streamMessages, streamBytes, streamLastSeq, streamConsumers *prometheus.Desc
}

func newRiftCollector(svc *service.Service) *riftCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("rift_"+name, help, labels, nil)
	}
	return &riftCollector{
		svc:             svc,
		connections:     desc("connections", "Open QUIC connections."),
		subscriptions:   desc("subscriptions", "Live subscriptions, including the server's own."),
		published:       desc("published_total", "Publications, whether anyone received them or not."),
		delivered:       desc("delivered_total", "Messages handed to subscriptions (once per receiver)."),
		slow:            desc("slow_consumers_total", "Subscriptions ended because they fell behind."),
		streamMessages:  desc("stream_messages", "Records held by a durable stream.", "stream"),
		streamBytes:     desc("stream_bytes", "Bytes (subject, reply and payload) of the records a durable stream holds.", "stream"),
		streamLastSeq:   desc("stream_last_sequence", "Sequence of a durable stream's latest record.", "stream"),
		streamConsumers: desc("stream_consumers", "Consumers of a durable stream.", "stream"),
	}
}

func (c *riftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connections, c.subscriptions, c.published, c.delivered, c.slow,
		c.streamMessages, c.streamBytes, c.streamLastSeq, c.streamConsumers} {
		ch <- d
	}
}

func (c *riftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Status()
	counts := c.svc.Bus.Counters()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.connections, float64(st.Connections))
	gauge(c.subscriptions, float64(st.Subscriptions))
	counter(c.published, counts.Published)
	counter(c.delivered, counts.Delivered)
	counter(c.slow, counts.SlowConsumers)
	for _, s := range st.Streams {
		gauge(c.streamMessages, float64(s.Messages), s.Name)
		gauge(c.streamBytes, float64(s.Bytes), s.Name)
		gauge(c.streamLastSeq, float64(s.LastSequence), s.Name)
		gauge(c.streamConsumers, float64(s.Consumers), s.Name)
	}
}
