package broker

import (
	"slices"
	"sync"
)

// The rows of the HTTP admin API's queue list (QueueSummaries, QueueSummaryFrom). A queue's row
// is read where its group's state is: on this node for a group it leads or holds asleep, else,
// on a node of a cluster, from the node that leads the group (QueueListOptions.Remote, which
// asks that node's GroupRows). A sharded queue has one row, the sum of its shards' groups' rows;
// a shard's group is never listed under its own name.

// groupsOf returns queue's groups: its shards' groups when it is sharded, else queue itself.
func (b *Broker) groupsOf(queue string) []string {
	if groups := b.shardGroups(queue); groups != nil {
		return groups
	}
	return []string{queue}
}

// rowsOf returns the rows of the queues names, in order: each the sum of its groups' rows (a
// sharded queue's shards), read where groupRows can. A queue none of whose groups could be read
// is left out.
func (b *Broker) rowsOf(names []string, remote RowFetcher) []QueueRow {
	var groups []string
	for _, n := range names {
		groups = append(groups, b.groupsOf(n)...)
	}
	rows := b.groupRows(groups, remote)
	out := make([]QueueRow, 0, len(names))
	for _, n := range names {
		sum, found := QueueRow{Name: n, Asleep: true}, false
		for _, g := range b.groupsOf(n) {
			if row, ok := rows[g]; ok {
				found = true
				addRow(&sum, &row)
			}
		}
		if found {
			out = append(out, sum)
		}
	}
	return out
}

// groupRows reads the rows of groups, by name: from this node's state where it can (the groups it
// leads, and those asleep here), a few at a time, and the others through remote (nil: they are
// left out) from the nodes that lead them, one request per node, all at once.
func (b *Broker) groupRows(groups []string, remote RowFetcher) map[string]QueueRow {
	rows := make([]QueueRow, len(groups))
	ok := make([]bool, len(groups))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(queueRowReaders, len(groups)) {
		wg.Go(func() {
			for i := range next {
				if r := b.lookup(groups[i]); r.a != nil {
					rows[i], ok[i] = b.queueRow(groups[i], r)
				}
			}
		})
	}
	for i := range groups {
		next <- i
	}
	close(next)
	wg.Wait()
	out := make(map[string]QueueRow, len(groups))
	missing := map[string]bool{}
	for i, g := range groups {
		if ok[i] {
			out[g] = rows[i]
		} else {
			missing[g] = true
		}
	}
	if remote == nil || len(missing) == 0 {
		return out
	}
	byNode := map[uint64][]string{}
	for g, id := range b.leaderIDs(missing) {
		if n := nodeNumber(id); n != 0 {
			byNode[n] = append(byNode[n], g)
		}
	}
	var mu sync.Mutex
	for node, gs := range byNode {
		wg.Go(func() {
			got := remote(node, gs)
			mu.Lock()
			defer mu.Unlock()
			for _, g := range gs {
				if row, ok := got[g]; ok {
					out[g] = row
				}
			}
		})
	}
	wg.Wait()
	return out
}

// GroupRows returns the rows of the queue groups named (a shard's group under its own name) that
// this node can read from its own state, those visible (nil: every one) says may be shown: what
// another node's queue list asks of this one (QueueListOptions.Remote).
func (b *Broker) GroupRows(groups []string, visible func(queue string) bool) []QueueRow {
	var shown []string
	for _, g := range groups {
		if visible == nil || visible(clientQueue(g)) {
			shown = append(shown, g)
		}
	}
	rows := b.groupRows(shown, nil)
	out := make([]QueueRow, 0, len(rows))
	for _, g := range shown {
		if row, ok := rows[g]; ok {
			out = append(out, row)
		}
	}
	return out
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
