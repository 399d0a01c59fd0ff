package broker

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/meta"
)

// Rebalancing (clustering.md, "Operations"): while the meta state's rebalancing mode is enabled
// (SetRebalancing; a pause that has run out counts as enabled), the node that leads the meta
// group spreads the queue groups' leaderships evenly over the nodes that are up and do not drain.
// Every rebalanceTick (rebalanceSoon after a round that moved as many as it may) it counts who
// leads each group, as GetClusterStatus does, and when some node leads at least two more groups
// than another, it moves a few of them (at most rebalanceMoves a round) from the nodes that lead
// the most to the nodes that lead the fewest, each to a replica of the group, preferring the
// group's preferred leader (the placement's choice). A move is the one MoveQueueLeader makes (the group's leader transfers its leadership
// and answers once the target leads), and counts once the target leads.
//
// Against flapping: a move only goes from a node above the even share to a node below it whose
// count is at least two lower, so every move narrows the spread and nothing moves once counts
// differ by at most one; a group is moved only when the same node led it at the previous round
// too (no election or move under way), and never again within rebalanceCooldown of its last
// move; a node counts only once it was up at the previous round too (a node that just came back
// first opens its replicas). Groups that sleep (hibernation) count for their preferred leader, as
// GetClusterStatus shows them, and are not woken to be moved; groups the meta leader does not
// replicate count for their preferred leader too, and are not moved (it does not know who leads
// them).

// Timing of rebalancing.
const (
	rebalanceTick     = 2 * time.Second
	rebalanceSoon     = 500 * time.Millisecond // the next round after a full one
	rebalanceMoves    = 8                      // moves a round, at most
	rebalanceParallel = 4                      // moves under way at once, at most
	rebalanceCooldown = 30 * time.Second
)

// rebalancer moves leaderships while this node leads the meta group and rebalancing is enabled;
// nil on a single node. Its maps belong to run's goroutine.
type rebalancer struct {
	b     *Broker
	moves prometheus.Counter

	seen     map[string]meta.NodeID // group → its leader at the previous round (groups led here or seen from a replica here)
	up       map[meta.NodeID]bool   // the nodes that were up and did not drain at the previous round
	cooldown map[string]time.Time   // group → when it may be moved again
}

func newRebalancer(b *Broker) *rebalancer {
	return &rebalancer{
		b: b,
		moves: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fila", Name: "cluster_rebalance_moves_total",
			Help: "Queue group leaderships this node moved to another node by rebalancing (counted once the target leads), while it led the meta group."}),
		cooldown: map[string]time.Time{},
	}
}

// run plays a round every rebalanceTick until the broker closes, or rebalanceSoon after a round
// that moved as many as a round may (more are likely to wait).
func (r *rebalancer) run() {
	t := time.NewTimer(rebalanceTick)
	defer t.Stop()
	for {
		select {
		case <-r.b.stopWatch:
			return
		case <-t.C:
		}
		next := rebalanceTick
		if r.round() >= rebalanceMoves {
			next = rebalanceSoon
		}
		t.Reset(next)
	}
}

// active reports whether this node is to rebalance now: it leads the meta group and the mode is
// enabled.
func (r *rebalancer) active() bool {
	g := r.b.metaGroupNow()
	if g == nil || !g.Leader() || r.b.isClosed() {
		return false
	}
	mode, _ := r.b.rebalancing()
	return mode == RebalancingEnabled
}

// round counts the leaderships and moves the groups planned; it returns how many moved.
func (r *rebalancer) round() int {
	if !r.active() {
		r.seen, r.up = nil, nil // start afresh: a new observation first
		return 0
	}
	v := r.observe()
	plan := planMoves(v.counts, v.movable, rebalanceMoves)
	if len(plan) == 0 {
		return 0
	}
	until := time.Now().Add(rebalanceCooldown)
	for _, m := range plan {
		r.cooldown[m.group.Name()] = until
	}
	var moved atomic.Int32
	errs := eachAtOnce(len(plan), rebalanceParallel, func(i int) error {
		if !r.active() { // paused, disabled or deposed meanwhile
			return nil
		}
		m := plan[i]
		if err := r.b.moveOnce(m.group, m.to, 0, time.Now().Add(moveTimeout)); err != nil {
			return err
		}
		moved.Add(1)
		r.moves.Inc()
		return nil
	})
	attrs := []any{"moved", moved.Load(), "planned", len(plan), "leaderships", countsText(v.counts)}
	failed := 0
	for i, err := range errs {
		if err != nil {
			if failed == 0 { // the first failure says why; its group is left alone for a while
				attrs = append(attrs, "group", plan[i].group.Name(), "to", plan[i].to, "err", err)
			}
			failed++
		}
	}
	if failed > 0 {
		attrs = append(attrs, "failed", failed)
	}
	r.b.log.Info("rebalancing: moved queue group leaderships", attrs...)
	return int(moved.Load())
}

// leadView is a round's count: the groups each node that may lead leads, and those of them that
// may move now.
type leadView struct {
	counts  map[meta.NodeID]int
	movable map[meta.NodeID][]movable
}

// movable is a group that may be moved, with the replica that should lead it.
type movable struct {
	group     meta.Assignment
	preferred meta.NodeID
}

// observe counts who leads each group, and remembers it (and the nodes up) for the next round.
func (r *rebalancer) observe() leadView {
	b := r.b
	cat, self, now := b.catalog(), b.nodeID(), time.Now()
	conn, _ := b.opts.Cluster.Network.(peerStates)
	up := map[meta.NodeID]bool{}
	v := leadView{counts: map[meta.NodeID]int{}, movable: map[meta.NodeID][]movable{}}
	for _, n := range cat.Nodes() {
		if n.Draining || n.ID != self && conn != nil && !conn.Connected(n.ID) {
			continue
		}
		up[n.ID] = true
		if r.up[n.ID] {
			v.counts[n.ID] = 0
		}
	}
	groups := cat.Assignments()
	acts := make([]*actor, len(groups))
	for i := range groups {
		acts[i] = b.lookup(groups[i].Name()).a
	}
	known := knownLeaders(acts)
	seen := make(map[string]meta.NodeID, len(groups))
	for i := range groups {
		a, name := &groups[i], groups[i].Name()
		local := acts[i] != nil && !known[i].asleep
		id := known[i].id
		if !local {
			id = preferredLeader(cat, a)
		} else if id != "" {
			seen[name] = id
		}
		if _, ok := v.counts[id]; !ok {
			continue // no leader known, or it is down, draining or just came up
		}
		v.counts[id]++
		if local && r.seen[name] == id && now.After(r.cooldown[name]) {
			v.movable[id] = append(v.movable[id], movable{group: *a, preferred: preferredLeader(cat, a)})
		}
	}
	for name, t := range r.cooldown {
		if now.After(t) {
			delete(r.cooldown, name)
		}
	}
	r.seen, r.up = seen, up
	return v
}

// leadMove is a planned move of group's leadership from one node to another.
type leadMove struct {
	group    meta.Assignment
	from, to meta.NodeID
}

// planMoves plans at most limit moves that even out counts (the groups each eligible node
// leads): each from a node above the even share to a replica of the group below it that leads at
// least two fewer, the most loaded nodes first, a group's preferred leader when it qualifies,
// else the least loaded replica that does. Nothing is planned once counts differ by at most one.
func planMoves(counts map[meta.NodeID]int, movables map[meta.NodeID][]movable, limit int) []leadMove {
	counts = maps.Clone(counts)
	total := 0
	for _, c := range counts {
		total += c
	}
	if len(counts) < 2 {
		return nil
	}
	floor := total / len(counts)
	ceil := (total + len(counts) - 1) / len(counts)
	used := map[string]bool{}
	var plan []leadMove
	for len(plan) < limit {
		m, ok := nextMove(counts, movables, used, floor, ceil)
		if !ok {
			break
		}
		counts[m.from]--
		counts[m.to]++
		used[m.group.Name()] = true
		plan = append(plan, m)
	}
	return plan
}

// nextMove is the next move planMoves makes, if any.
func nextMove(counts map[meta.NodeID]int, movables map[meta.NodeID][]movable, used map[string]bool, floor, ceil int) (leadMove, bool) {
	sources := make([]meta.NodeID, 0, len(counts))
	for id := range counts {
		sources = append(sources, id)
	}
	sort.Slice(sources, func(i, j int) bool {
		ci, cj := counts[sources[i]], counts[sources[j]]
		return ci > cj || ci == cj && sources[i] < sources[j]
	})
	for _, s := range sources {
		if counts[s] <= floor {
			break
		}
		best, bestPreferred, found := leadMove{}, false, false
		for _, m := range movables[s] {
			if used[m.group.Name()] {
				continue
			}
			for _, t := range m.group.Replicas {
				c, eligible := counts[t]
				if !eligible || t == s || c >= ceil || c > counts[s]-2 {
					continue
				}
				preferred := t == m.preferred
				switch {
				case !found, preferred && !bestPreferred,
					preferred == bestPreferred && (c < counts[best.to] || c == counts[best.to] && t < best.to):
					best, bestPreferred, found = leadMove{group: m.group, from: s, to: t}, preferred, true
				}
			}
		}
		if found {
			return best, true
		}
	}
	return leadMove{}, false
}

// countsText shows counts for a log line: "1=4 2=4 3=4".
func countsText(counts map[meta.NodeID]int) string {
	ids := make([]meta.NodeID, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var sb strings.Builder
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(string(id))
		sb.WriteByte('=')
		sb.WriteString(strconv.Itoa(counts[id]))
	}
	return sb.String()
}
