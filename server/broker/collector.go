package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/engine"
)

// collector reports per-queue gauges from the actors' live state at scrape time.
type collector struct {
	b                                         *Broker
	depth, inFlight, delayed, keys, consumers *prometheus.Desc
}

// NewCollector returns a Prometheus collector of per-queue gauges: depth, in-flight, delayed,
// active fairness keys and active consumers.
func NewCollector(b *Broker) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("fila_queue_"+name, help, []string{"queue"}, nil)
	}
	return &collector{
		b:         b,
		depth:     d("depth", "Stored messages not leased."),
		inFlight:  d("in_flight", "Leased messages."),
		delayed:   d("delayed", "Messages not yet eligible (delay or retry backoff)."),
		keys:      d("active_fairness_keys", "Fairness keys with ready messages."),
		consumers: d("active_consumers", "Subscriptions."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.inFlight, c.delayed, c.keys, c.consumers} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.b.queueNames() {
		r := c.b.lookup(name)
		if r.a == nil {
			continue
		}
		var s engine.Stats
		if !r.a.call(func(a *actor) { s = a.st.Lane(r.lane).Stats() }) {
			continue
		}
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		g(c.depth, float64(s.Depth))
		g(c.inFlight, float64(s.InFlight))
		g(c.delayed, float64(s.Delayed))
		g(c.keys, float64(s.ActiveFairnessKeys))
		g(c.consumers, float64(s.ActiveConsumers))
	}
}
