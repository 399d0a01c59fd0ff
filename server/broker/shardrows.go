package broker

import "slices"

// The queue list of the HTTP admin API (QueueSummaries, QueueSummary) answers a sharded queue in
// one row: the sum of the rows of its shards' groups this node holds (the list is the node's own
// view, as for any queue). A shard's group is never listed under its own name.

// wholeRow is queue's row; ok is false when this node holds no group of it.
func (b *Broker) wholeRow(queue string) (QueueRow, bool) {
	groups := b.shardGroups(queue)
	if groups == nil {
		r := b.lookup(queue)
		if r.a == nil {
			return QueueRow{}, false
		}
		return b.queueRow(queue, r)
	}
	out := QueueRow{Name: queue, Asleep: true}
	found := false
	for _, g := range groups {
		r := b.lookup(g)
		if r.a == nil {
			continue
		}
		row, ok := b.queueRow(g, r)
		if !ok {
			continue
		}
		found = true
		addRow(&out, &row)
	}
	out.Asleep = found && out.Asleep
	return out, found
}

// addRow adds row's counters to sum: counts and rates add up, the oldest age is the largest, and
// the sum is asleep only while every part is.
func addRow(sum, row *QueueRow) {
	sum.Depth += row.Depth
	sum.Ready += row.Ready
	sum.InFlight += row.InFlight
	sum.Delayed += row.Delayed
	sum.Held += row.Held
	sum.Throttled += row.Throttled
	sum.Parked += row.Parked
	sum.DLQDepth += row.DLQDepth
	sum.OldestAgeMs = max(sum.OldestAgeMs, row.OldestAgeMs)
	sum.EnqueuedPerS += row.EnqueuedPerS
	sum.AckedPerS += row.AckedPerS
	sum.FairnessKeys += row.FairnessKeys
	sum.Consumers += row.Consumers
	sum.Asleep = sum.Asleep && row.Asleep
}

// listedNames maps the names of the queue lanes a node holds to the names the list shows (a
// shard's group: its queue's), sorted, each once.
func listedNames(names []string) []string {
	for i, n := range names {
		names[i] = clientQueue(n)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
