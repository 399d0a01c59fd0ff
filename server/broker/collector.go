package broker

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/storage"
)

// DefaultTopKeys is how many fairness keys per queue the collector reports by default.
const DefaultTopKeys = 10

// DefaultMetricsQueues is how many queues the collector gives series of their own by default.
const DefaultMetricsQueues = 100

// OtherQueues is the queue label of the series that sum the queues without series of their own.
// A queue name cannot hold "*", so no queue has this label.
const OtherQueues = "*others"

// CollectorOptions configures NewCollector. Zero fields take the defaults shown.
type CollectorOptions struct {
	// TopKeys bounds fila_queue_fairness_key_ready: per queue, only the TopKeys keys with the
	// most ready messages get a series (ties by key), so a queue with a million tenants still
	// makes at most TopKeys series (DefaultTopKeys).
	TopKeys int
	// MaxQueues bounds the queues with series of their own (DefaultMetricsQueues): at each scrape
	// the MaxQueues queues with the most stored messages (ready, delayed and in flight), ties by
	// messages enqueued since the start, then by name; every other queue is summed into the
	// series labelled OtherQueues (the age of the oldest ready message is their largest). A
	// dead-letter queue ranks as a queue of its own.
	MaxQueues int
}

// collector reports the per-queue series: gauges from the actors' live state at scrape time,
// the counters and histograms the actors keep (metrics.go).
type collector struct {
	b                  *Broker
	topKeys, maxQueues int

	depth, inFlight, delayed, keys, consumers, oldestAge, keyReady, storedBytes *prometheus.Desc
	groups, blockedGroups                                                       *prometheus.Desc
	counters, histograms                                                        []*prometheus.Desc // in the order of queueMetrics' counters and histograms
}

// NewCollector returns a Prometheus collector of the per-queue series: gauges (depth, in-flight,
// delayed, active fairness keys and consumers, the age of the oldest ready message, the ready
// backlog of the top fairness keys, the bytes a queue group stores, and for ordered queues the
// ordering groups with messages and those blocked by an in-flight head), and the counters and
// histograms of each queue's traffic. At most MaxQueues queues get series of their own.
func NewCollector(b *Broker, o CollectorOptions) prometheus.Collector {
	if o.TopKeys <= 0 {
		o.TopKeys = DefaultTopKeys
	}
	if o.MaxQueues <= 0 {
		o.MaxQueues = DefaultMetricsQueues
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fila_queue_"+name, help, append([]string{"queue"}, labels...), nil)
	}
	c := &collector{
		b:         b,
		topKeys:   o.TopKeys,
		maxQueues: o.MaxQueues,
		depth:     d("depth", "Stored messages not leased."),
		inFlight:  d("in_flight", "Leased messages."),
		delayed:   d("delayed", "Messages not yet eligible (delay or retry backoff)."),
		keys:      d("active_fairness_keys", "Fairness keys with ready messages."),
		consumers: d("active_consumers", "Subscriptions."),
		oldestAge: d("oldest_ready_age_seconds",
			"Age of the oldest message waiting at the head of a fairness key's ready list (like SQS ApproximateAgeOfOldestMessage); 0 when none is ready."),
		keyReady:      d("fairness_key_ready", "Ready messages of the fairness keys with the largest backlog (at most --metrics-top-keys per queue).", "key"),
		groups:        d("ordering_groups", "Ordering groups with stored messages (ordered queues only)."),
		blockedGroups: d("ordering_groups_blocked", "Ordering groups whose head is in flight, so nothing else of the group is delivered (ordered queues only)."),
		storedBytes: d("stored_bytes",
			"Estimated on-disk bytes of the queue's group: its log and message bodies, its dead-letter queue included (flushed data only)."),
	}
	for _, v := range b.metrics.counterVecs() {
		c.counters = append(c.counters, descOf(v))
	}
	for _, h := range histogramSpecs {
		c.histograms = append(c.histograms, prometheus.NewDesc(h.name, h.help, []string{"queue"}, nil))
	}
	return c
}

// descOf returns the one description of a metric vector.
func descOf(v prometheus.Collector) *prometheus.Desc {
	ch := make(chan *prometheus.Desc, 1)
	v.Describe(ch)
	return <-ch
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.inFlight, c.delayed, c.keys, c.consumers, c.oldestAge, c.keyReady, c.storedBytes,
		c.groups, c.blockedGroups} {
		ch <- d
	}
	for _, d := range append(slices.Clip(c.counters), c.histograms...) {
		ch <- d
	}
}

// queueRow is what a scrape reads of one queue.
type queueRow struct {
	name            string
	s               engine.Stats // counters only; Keys are the top keys
	oldest          int64
	hasOldest       bool
	ordered         bool
	bytes           float64 // fila_queue_stored_bytes, when hasBytes
	hasBytes        bool
	m               queueMetrics // when hasMetrics (its actor has run)
	hasMetrics      bool
	stored, traffic float64 // the ranking: stored messages, then messages enqueued
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	rows := c.read()
	slices.SortFunc(rows, func(a, b queueRow) int {
		if x := cmp.Compare(b.stored, a.stored); x != 0 {
			return x
		}
		if x := cmp.Compare(b.traffic, a.traffic); x != 0 {
			return x
		}
		return cmp.Compare(a.name, b.name)
	})
	now := c.b.clock().UnixMilli()
	own := rows[:min(len(rows), c.maxQueues)]
	for i := range own {
		c.emit(ch, &own[i], now)
	}
	if len(rows) > len(own) {
		c.emitOthers(ch, rows[len(own):], now)
	}
}

// read reads every queue's counters, top keys and series.
func (c *collector) read() []queueRow {
	usage, _ := c.b.db.(storage.Usage)
	names := c.b.queueNames()
	rows := make([]queueRow, 0, len(names))
	for _, name := range names {
		r := c.b.lookup(name)
		if r.a == nil {
			continue
		}
		row := queueRow{name: name}
		slept := r.a.asleep(func(sum *summary) {
			row.ordered = r.a.lanes[r.lane].keys.ordering != store.OrderingNone
			l := sum.Lanes[r.lane]
			row.s, row.oldest, row.hasOldest = l.Stats, l.Oldest, l.HasOldest
			row.s.Keys = engine.TopKeys(slices.Values(l.Stats.Keys), c.topKeys)
		})
		if !slept && !r.a.read(func(a *actor) {
			row.ordered = a.lanes[r.lane].keys.ordering != store.OrderingNone
			q := a.st.Lane(r.lane)
			row.s = q.Counts()
			row.s.Keys = q.TopKeys(c.topKeys)
			row.oldest, row.hasOldest = q.OldestReady()
		}) {
			continue
		}
		if usage != nil && r.lane == queuegroup.LaneQueue {
			if n, err := usage.GroupBytes(name); err == nil {
				row.bytes, row.hasBytes = float64(n), true
			}
		}
		row.m, row.hasMetrics = c.b.metrics.series(name)
		row.stored = float64(row.s.Depth + row.s.InFlight)
		if row.hasMetrics {
			row.traffic = counterValue(row.m.enqueued)
		}
		rows = append(rows, row)
	}
	return rows
}

// emit sends the series of a queue that has series of its own.
func (c *collector) emit(ch chan<- prometheus.Metric, row *queueRow, now int64) {
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{row.name}, labels...)...)
	}
	s := &row.s
	g(c.depth, float64(s.Depth))
	g(c.inFlight, float64(s.InFlight))
	g(c.delayed, float64(s.Delayed))
	g(c.keys, float64(s.ActiveFairnessKeys))
	g(c.consumers, float64(s.ActiveConsumers))
	age := 0.0
	if row.hasOldest {
		age = msSeconds(row.oldest, now)
	}
	g(c.oldestAge, age)
	if row.ordered {
		g(c.groups, float64(s.OrderingGroups))
		g(c.blockedGroups, float64(s.BlockedGroups))
	}
	for _, k := range s.Keys {
		g(c.keyReady, float64(k.Pending), keyLabel(k.Key))
	}
	if row.hasBytes {
		g(c.storedBytes, row.bytes)
	}
	if row.hasMetrics {
		for _, m := range row.m.counters() {
			ch <- m
		}
		for i, h := range row.m.histograms() {
			if h != nil {
				var one histogramSum
				one.add(h)
				count, buckets := one.cumulative()
				ch <- prometheus.MustNewConstHistogram(c.histograms[i], count, one.sum, buckets, row.name)
			}
		}
	}
}

// maxKeyLabel bounds the key label of fila_queue_fairness_key_ready, in bytes: fairness keys may
// be 64 KiB long, and a scrape carries up to metrics_top_keys of them for every queue.
const maxKeyLabel = 128

// keyLabel is a fairness key as a label value: the key itself when it is valid UTF-8 of at most
// maxKeyLabel bytes; else its first bytes (cut at a character, invalid bytes replaced) followed by
// "…" and 12 hex digits of its SHA-256, so that two long keys with the same beginning still get
// two series.
func keyLabel(k string) string {
	if len(k) <= maxKeyLabel && utf8.ValidString(k) {
		return k
	}
	cut := min(len(k), maxKeyLabel-len("…")-12)
	for cut > 0 && cut < len(k) && !utf8.RuneStart(k[cut]) {
		cut--
	}
	h := sha256.Sum256([]byte(k))
	return strings.ToValidUTF8(k[:cut], "\uFFFD") + "…" + hex.EncodeToString(h[:6])
}
