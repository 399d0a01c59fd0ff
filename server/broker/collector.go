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

// CollectorOptions configures NewCollector. Zero fields take the defaults shown.
type CollectorOptions struct {
	// TopKeys bounds fila_queue_fairness_key_ready: per queue, only the TopKeys keys with the
	// most ready messages get a series (ties by key), so a queue with a million tenants still
	// makes at most TopKeys series (DefaultTopKeys).
	TopKeys int
}

// collector reports per-queue gauges from the actors' live state at scrape time.
type collector struct {
	b       *Broker
	topKeys int

	depth, inFlight, delayed, keys, consumers, oldestAge, keyReady, storedBytes *prometheus.Desc
	groups, blockedGroups                                                       *prometheus.Desc
}

// NewCollector returns a Prometheus collector of per-queue gauges: depth, in-flight, delayed,
// active fairness keys and consumers, the age of the oldest ready message, the ready backlog of
// the top fairness keys, the bytes a queue group stores, and for ordered queues the ordering
// groups with messages and those blocked by an in-flight head.
func NewCollector(b *Broker, o CollectorOptions) prometheus.Collector {
	if o.TopKeys <= 0 {
		o.TopKeys = DefaultTopKeys
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fila_queue_"+name, help, append([]string{"queue"}, labels...), nil)
	}
	return &collector{
		b:         b,
		topKeys:   o.TopKeys,
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
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.inFlight, c.delayed, c.keys, c.consumers, c.oldestAge, c.keyReady, c.storedBytes,
		c.groups, c.blockedGroups} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	now := c.b.clock().UnixMilli()
	usage, _ := c.b.db.(storage.Usage)
	for _, name := range c.b.queueNames() {
		r := c.b.lookup(name)
		if r.a == nil {
			continue
		}
		var s engine.Stats
		var oldest int64
		var hasOldest, ordered bool
		slept := r.a.asleep(func(sum *summary) {
			ordered = r.a.lanes[r.lane].keys.ordering != store.OrderingNone
			l := sum.Lanes[r.lane]
			s, oldest, hasOldest = cloneStats(l.Stats), l.Oldest, l.HasOldest
		})
		if !slept && !r.a.call(func(a *actor) {
			ordered = a.lanes[r.lane].keys.ordering != store.OrderingNone
			q := a.st.Lane(r.lane)
			s = q.Stats()
			oldest, hasOldest = q.OldestReady()
		}) {
			continue
		}
		g := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{name}, labels...)...)
		}
		g(c.depth, float64(s.Depth))
		g(c.inFlight, float64(s.InFlight))
		g(c.delayed, float64(s.Delayed))
		g(c.keys, float64(s.ActiveFairnessKeys))
		g(c.consumers, float64(s.ActiveConsumers))
		age := 0.0
		if hasOldest {
			age = msSeconds(oldest, now)
		}
		g(c.oldestAge, age)
		if ordered {
			g(c.groups, float64(s.OrderingGroups))
			g(c.blockedGroups, float64(s.BlockedGroups))
		}
		for _, k := range topKeys(s.Keys, c.topKeys) {
			g(c.keyReady, float64(k.Pending), keyLabel(k.Key))
		}
		if usage != nil && r.lane == queuegroup.LaneQueue {
			if n, err := usage.GroupBytes(name); err == nil {
				g(c.storedBytes, float64(n))
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

// topKeys returns the n keys with the most ready messages, ties by key; keys with none are left
// out. It reorders keys.
func topKeys(keys []engine.KeyStats, n int) []engine.KeyStats {
	slices.SortFunc(keys, func(a, b engine.KeyStats) int {
		if c := cmp.Compare(b.Pending, a.Pending); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	i := 0
	for i < len(keys) && i < n && keys[i].Pending > 0 {
		i++
	}
	return keys[:i]
}
