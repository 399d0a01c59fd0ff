package broker

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/service"
)

// The fairness-key table and the queue list of the admin API. A key table is one pass over the
// queue's keys on its actor (engine.Queue.KeyTable); a sleeping queue answers from its summary
// without waking (its keys are the summary's, at most maxSummaryKeys). The queue list reads each
// queue's counters on its actor, or from the summary of a sleeping one (never waking it), and
// its rates from the queue's enqueued and acked counters sampled as the list is read
// (rateSamples): the list costs nothing while nobody reads it.

// Key table and queue list types (server/service).
type (
	KeyListOptions   = service.KeyListOptions
	KeyRow           = service.KeyRow
	KeyPage          = service.KeyPage
	QueueListOptions = service.QueueListOptions
	QueueRow         = service.QueueRow
	QueuePage        = service.QueuePage
	RowFetcher       = service.RowFetcher
)

// FairnessKeys returns a page of queue's fairness keys (those with stored messages): searched,
// sorted by backlog (the default), deliveries in the last minute or name, after the key
// o.After. It fails with CodeQueueNotFound, or CodeInvalidConfigValue for a bad sort or limit.
func (b *Broker) FairnessKeys(queue string, o KeyListOptions) (KeyPage, *Error) {
	sort, ok := engine.ParseKeySort(o.Sort)
	switch {
	case !ok:
		return KeyPage{}, errorf(CodeInvalidConfigValue, "sort %q is not backlog, deliveries or name", o.Sort)
	case o.Limit < 0 || o.Limit > service.MaxKeyPage:
		return KeyPage{}, errorf(CodeInvalidConfigValue, "limit %d is not in 1..%d", o.Limit, service.MaxKeyPage)
	case o.Limit == 0:
		o.Limit = service.DefaultKeyPage
	}
	r := b.lookup(queue)
	if r.a == nil {
		return KeyPage{}, errorf(CodeQueueNotFound, "queue %q does not exist", queue)
	}
	opts := engine.KeyTableOptions{Search: o.Search, Sort: sort, After: o.After, Limit: o.Limit}
	var page KeyPage
	if r.a.asleep(func(s *summary) { page = sleepingKeys(&s.Lanes[r.lane].Stats, opts) }) {
		return page, nil
	}
	if !r.a.read(func(a *actor) {
		q := a.st.Lane(r.lane)
		t := q.KeyTable(a.now(), opts)
		page = KeyPage{Keys: make([]KeyRow, len(t.Keys)), Next: t.Next, Total: t.Total, DeliveriesLastMinute: t.DeliveriesLastMinute}
		for i, k := range t.Keys {
			page.Keys[i] = KeyRow{Key: k.Key, Backlog: k.Backlog, Ready: k.Ready, InFlight: k.InFlight, Weight: k.Weight,
				Deficit: k.Deficit, DeliveriesLastMinute: k.DeliveriesLastMinute, WeightedShare: k.WeightedShare}
		}
	}) {
		return KeyPage{}, errorf(CodeQueueNotFound, "queue %q was deleted", queue)
	}
	return page, nil
}

// sleepingKeys is a page of a sleeping lane's key table, from its summary: the summary keeps
// each key's ready messages, deficit and weight (a sleeping lane has no fast leases and no
// throttles; committed leases and delayed messages are not counted per key).
func sleepingKeys(s *engine.Stats, o engine.KeyTableOptions) KeyPage {
	rows := make([]KeyRow, 0, len(s.Keys))
	var weights uint64
	for _, k := range s.Keys {
		if k.Pending > 0 {
			weights += uint64(k.Weight)
		}
		if o.Search == "" || strings.Contains(k.Key, o.Search) {
			rows = append(rows, KeyRow{Key: k.Key, Backlog: k.Pending, Ready: k.Pending, Weight: k.Weight, Deficit: uint64(max(k.Deficit, 0))})
		}
	}
	before := func(a, b *KeyRow) int {
		if o.Sort == engine.KeysByBacklog && a.Backlog != b.Backlog {
			return cmp.Compare(b.Backlog, a.Backlog)
		}
		return strings.Compare(a.Key, b.Key)
	}
	slices.SortFunc(rows, func(a, b KeyRow) int { return before(&a, &b) })
	page := KeyPage{Total: len(rows), Asleep: true, Keys: []KeyRow{}}
	from := 0
	if o.After != "" {
		cursor := KeyRow{Key: o.After}
		if i := slices.IndexFunc(rows, func(r KeyRow) bool { return r.Key == o.After }); i >= 0 {
			cursor = rows[i]
		}
		from, _ = slices.BinarySearchFunc(rows, cursor, func(r, c KeyRow) int { return before(&r, &c) })
		if from < len(rows) && rows[from].Key == o.After {
			from++
		}
	}
	end := min(from+o.Limit, len(rows))
	page.Keys = append(page.Keys, rows[from:end]...)
	if end < len(rows) && end > from {
		page.Next = rows[end-1].Key
	}
	for i := range page.Keys {
		if page.Keys[i].Backlog > 0 && weights > 0 {
			page.Keys[i].WeightedShare = float64(page.Keys[i].Weight) / float64(weights)
		}
	}
	return page
}

// QueueSummaries returns a page of the queue list: the queues whose name contains o.Search,
// sorted by name (the default), depth (the deepest first) or oldest (the oldest waiting
// message first), after the queue o.After; dead-letter queues are counted on their queue's row.
// Sorting by name reads only the page's queues; the other sorts read every matching queue. It
// fails with CodeInvalidConfigValue for a bad sort or limit.
func (b *Broker) QueueSummaries(o QueueListOptions) (QueuePage, *Error) {
	switch {
	case o.Sort != "" && o.Sort != "name" && o.Sort != "depth" && o.Sort != "oldest":
		return QueuePage{}, errorf(CodeInvalidConfigValue, "sort %q is not name, depth or oldest", o.Sort)
	case o.Limit < 0 || o.Limit > service.MaxQueuePage:
		return QueuePage{}, errorf(CodeInvalidConfigValue, "limit %d is not in 1..%d", o.Limit, service.MaxQueuePage)
	case o.Limit == 0:
		o.Limit = service.DefaultQueuePage
	}
	names := b.listedQueues(o)
	page := QueuePage{Total: len(names), Queues: []QueueRow{}}
	if o.Sort == "" || o.Sort == "name" {
		from, _ := slices.BinarySearch(names, o.After)
		if o.After != "" && from < len(names) && names[from] == o.After {
			from++
		}
		end := min(from+o.Limit, len(names))
		page.Queues = append(page.Queues, b.rowsOf(names[from:end], o.Remote)...)
		if end < len(names) && len(page.Queues) > 0 {
			page.Next = page.Queues[len(page.Queues)-1].Name
		}
		return page, nil
	}
	rows := b.rowsOf(names, o.Remote)
	before := func(a, c *QueueRow) int {
		var d int
		if o.Sort == "depth" {
			d = cmp.Compare(c.Depth, a.Depth)
		} else {
			d = cmp.Compare(c.OldestAgeMs, a.OldestAgeMs)
		}
		if d != 0 {
			return d
		}
		return strings.Compare(a.Name, c.Name)
	}
	slices.SortFunc(rows, func(a, c QueueRow) int { return before(&a, &c) })
	from := 0
	if o.After != "" {
		cursor := QueueRow{Name: o.After}
		if i := slices.IndexFunc(rows, func(r QueueRow) bool { return r.Name == o.After }); i >= 0 {
			cursor = rows[i]
		}
		from, _ = slices.BinarySearchFunc(rows, cursor, func(r, c QueueRow) int { return before(&r, &c) })
		if from < len(rows) && rows[from].Name == o.After {
			from++
		}
	}
	end := min(from+o.Limit, len(rows))
	page.Queues = append(page.Queues, rows[from:end]...)
	if end < len(rows) && end > from {
		page.Next = rows[end-1].Name
	}
	return page, nil
}

// QueueSummary returns the queue list's row of queue (a dead-letter queue has a row of its own
// here, without dlq_depth) from this node's state. It fails with CodeQueueNotFound.
func (b *Broker) QueueSummary(queue string) (QueueRow, *Error) { return b.QueueSummaryFrom(queue, nil) }

// QueueSummaryFrom is QueueSummary with the rows of groups this node cannot read taken through
// remote (QueueListOptions.Remote).
func (b *Broker) QueueSummaryFrom(queue string, remote RowFetcher) (QueueRow, *Error) {
	r := b.lookup(queue)
	if r.a == nil && b.shardGroups(queue) == nil {
		if _, known := b.catalog().Queue(queue); !known || remote == nil {
			return QueueRow{}, errorf(CodeQueueNotFound, "queue %q does not exist", queue)
		}
	}
	rows := b.rowsOf([]string{queue}, remote)
	if len(rows) == 0 {
		return QueueRow{}, errorf(CodeQueueNotFound, "queue %q was deleted", queue)
	}
	return rows[0], nil
}

// queueRowReaders bounds the groups the queue list reads at once.
const queueRowReaders = 16

// listedQueues returns the names of the queues o lists, sorted: those of the queue groups this
// node holds, and, on a node of a cluster (o.Remote), every queue its meta state records.
func (b *Broker) listedQueues(o QueueListOptions) []string {
	var names []string
	for _, name := range b.queueNames() {
		if r := b.lookup(name); r.a != nil && r.lane == queuegroup.LaneQueue {
			names = append(names, name)
		}
	}
	if o.Remote != nil {
		for _, q := range b.catalog().Queues() {
			if q.DLQOf == "" && q.ShardOf == "" {
				names = append(names, q.Name)
			}
		}
	}
	names = listedNames(names) // a sharded queue once
	return slices.DeleteFunc(names, func(name string) bool {
		return !strings.Contains(name, o.Search) || o.Visible != nil && !o.Visible(name)
	})
}

// queueRow reads one queue's row: from its summary when it sleeps, else on its actor.
func (b *Broker) queueRow(name string, r queueRef) (QueueRow, bool) {
	var s, dlq engine.Stats
	var oldest int64
	var hasOldest, asleep bool
	var ready, keyCount uint64
	now := b.clock().UnixMilli()
	if r.a.asleep(func(sum *summary) {
		l := &sum.Lanes[r.lane]
		s, oldest, hasOldest, asleep = l.Stats, l.Oldest, l.HasOldest, true
		s.Keys = nil
		for _, k := range l.Stats.Keys {
			ready += k.Pending
		}
		keyCount = uint64(len(l.Stats.Keys))
		if r.lane == queuegroup.LaneQueue {
			dlq = sum.Lanes[queuegroup.LaneDeadLetter].Stats
			dlq.Keys = nil
		}
	}) {
	} else if !r.a.read(func(a *actor) {
		q := a.st.Lane(r.lane)
		now = a.now()
		q.Advance(now)
		s = q.Counts()
		oldest, hasOldest = q.OldestReady()
		ready, keyCount = uint64(q.ReadyCount()), uint64(q.KeyCount())
		if r.lane == queuegroup.LaneQueue {
			dlq = a.st.Lane(queuegroup.LaneDeadLetter).Counts()
		}
	}) {
		return QueueRow{}, false
	}
	row := QueueRow{Name: name, Depth: s.Depth, Ready: ready, InFlight: s.InFlight, Delayed: s.Delayed, Held: s.Held,
		Throttled: s.Throttled, Parked: s.Unclassified, DLQDepth: dlq.Depth + dlq.InFlight, FairnessKeys: keyCount,
		Consumers: s.ActiveConsumers, Asleep: asleep}
	if hasOldest && oldest < now {
		row.OldestAgeMs = now - oldest
	}
	if m, ok := b.metrics.series(name); ok {
		row.EnqueuedPerS, row.AckedPerS = b.queueRates.rates(name, now, counterValue(m.enqueued), counterValue(m.acked))
	}
	return row, true
}

// rateSamples keeps, per queue, samples of its enqueued and acked counters taken as the queue
// list is read (at most one per rateSampleMs), the oldest about a minute old: a rate is the
// counters' growth since the oldest sample of the last minute.
type rateSamples struct {
	mu sync.Mutex
	of map[string]*rateHistory
}

const (
	rateSampleMs = 5_000
	rateSpanMs   = 60_000
	rateHistLen  = rateSpanMs/rateSampleMs + 1
)

type rateSample struct {
	at            int64
	enqueued, ack float64
}

// rateHistory is a ring of samples, oldest first from head.
type rateHistory struct {
	s       [rateHistLen]rateSample
	head, n int
}

// maxRateQueues bounds the queues with samples; past it the samples of every queue are dropped
// and start again (queues deleted leave theirs behind until then).
const maxRateQueues = 1 << 17

// rates returns queue's enqueued and acked rates per second over the last minute (or since its
// first sample, if less; 0 at the first), given its counters now.
func (rs *rateSamples) rates(queue string, now int64, enqueued, acked float64) (enqPerS, ackPerS float64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.of == nil || len(rs.of) >= maxRateQueues {
		rs.of = map[string]*rateHistory{}
	}
	h := rs.of[queue]
	if h == nil {
		h = &rateHistory{}
		rs.of[queue] = h
	}
	if h.n > 0 { // a queue deleted and made again starts its counters again
		if last := h.s[(h.head+h.n-1)%rateHistLen]; enqueued < last.enqueued || acked < last.ack || now < last.at {
			h.n = 0
		}
	}
	for h.n > 1 && now-h.s[(h.head+1)%rateHistLen].at >= rateSpanMs { // keep one sample at least a minute old
		h.head, h.n = (h.head+1)%rateHistLen, h.n-1
	}
	if h.n > 0 {
		if first := h.s[h.head]; now > first.at {
			secs := float64(now-first.at) / 1000
			enqPerS, ackPerS = (enqueued-first.enqueued)/secs, (acked-first.ack)/secs
		}
	}
	if h.n == 0 || now-h.s[(h.head+h.n-1)%rateHistLen].at >= rateSampleMs {
		if h.n == rateHistLen {
			h.head, h.n = (h.head+1)%rateHistLen, h.n-1
		}
		h.s[(h.head+h.n)%rateHistLen] = rateSample{at: now, enqueued: enqueued, ack: acked}
		h.n++
	}
	return enqPerS, ackPerS
}
