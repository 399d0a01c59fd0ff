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
// group spreads the queue groups' leaderships evenly over the nodes that are up (connected, and
// heard from within rebalanceSilence: a stopped process keeps its connections) and do not drain.
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
// move (rebalanceRetry when the move failed); a node is given leaderships once it has been up for
// rebalanceWarmup (a node that just came back first opens its replicas and catches up); and no
// round moves anything while some group has no leader, or one that is down or has just come up
// (an election under way: the counts are not what they will be), for rebalanceSettle at most (a
// group that cannot elect a leader holds nothing up for good). Groups that sleep (hibernation) count for their preferred leader, as
// GetClusterStatus shows them, and are not woken to be moved; groups the meta leader does not
// replicate count for their preferred leader too, and are not moved (it does not know who leads
// them).

// Timing of rebalancing.
const (
	rebalanceTick     = 2 * time.Second
	rebalanceSoon     = 500 * time.Millisecond // the next round after a full one
	rebalanceMoves    = 8                      // moves a round, at most
	rebalanceParallel = 4                      // moves under way at once, at most
	rebalanceCooldown = 30 * time.Second       // a group that moved is left alone this long
	rebalanceRetry    = 5 * time.Second        // a group whose move failed, this long
	rebalanceWarmup   = 5 * time.Second        // a node is given leaderships once up this long
	rebalanceSettle   = 10 * time.Second       // groups without a leader that may lead hold moves up this long at most
)

// peerHeard is the Network of a node that knows when it last heard from each peer
// (nodelink.Link).
type peerHeard interface {
	Heard(node meta.NodeID) (time.Time, bool)
}

// rebalanceSilence is how long a connected node may send nothing before rebalancing counts it
// down: two heartbeat timeouts of the groups (this node, leading the meta group, sends it a
// heartbeat several times in each, which it answers while it runs).
func (b *Broker) rebalanceSilence() time.Duration {
	hb := b.opts.Cluster.HeartbeatTimeout
	if hb <= 0 {
		hb = time.Second
	}
	return 2 * hb
}

// rebalancer moves leaderships while this node leads the meta group and rebalancing is enabled;
// nil on a single node. Its maps belong to run's goroutine.
type rebalancer struct {
	b     *Broker
	moves prometheus.Counter

	seen      map[string]meta.NodeID    // group → its leader at the previous round (groups led here or seen from a replica here)
	upSince   map[meta.NodeID]time.Time // the nodes up and not draining, since when (kept at every round, active or not)
	unsettled time.Time                 // since when some group has had no leader that may lead (zero: none has)
	cooldown  map[string]time.Time      // group → when it may be moved again
	// counts is the previous round's count of leaderships by node: a round plans moves only when
	// it counts the same, so that a view still catching up with the last moves (this node's
	// replica of a moved group not told of its new leader yet) plans none.
	counts map[meta.NodeID]int
}

func newRebalancer(b *Broker) *rebalancer {
	return &rebalancer{
		b: b,
		moves: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fila", Name: "cluster_rebalance_moves_total",
			Help: "Queue group leaderships this node moved to another node by rebalancing (counted once the target leads), while it led the meta group."}),
		upSince:  map[meta.NodeID]time.Time{},
		cooldown: map[string]time.Time{},
	}
}

// run plays a round every rebalanceTick until the broker closes, or rebalanceSoon after a round
// that moved as many as a round may (more are likely to wait) or that found the counts changed
// (it plans once the next one counts the same).
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
		if moved, recount := r.round(); moved >= rebalanceMoves || recount {
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

// round counts the leaderships and moves the groups planned; it returns how many moved, and
// recount when it planned nothing because the counts changed since the previous round.
func (r *rebalancer) round() (moved int, recount bool) {
	now := time.Now()
	r.trackUp(now)
	if !r.active() {
		r.seen, r.unsettled, r.counts = nil, time.Time{}, nil // start afresh: a new observation first
		return 0, false
	}
	v := r.observe(now)
	if stable := maps.Equal(v.counts, r.counts); !stable {
		r.counts = v.counts
		return 0, true
	}
	switch {
	case !v.unsettled:
		r.unsettled = time.Time{}
	case r.unsettled.IsZero():
		r.unsettled = now
		return 0, false
	case now.Sub(r.unsettled) < rebalanceSettle:
		return 0, false // elections under way, or a node that came back leads a group: wait for them
	}
	plan := planMoves(v.counts, v.movable, rebalanceMoves)
	if len(plan) == 0 {
		return 0, false
	}
	r.counts = nil // the next round observes the moves first
	until := now.Add(rebalanceCooldown)
	for _, m := range plan {
		r.cooldown[m.group.Name()] = until
	}
	var done atomic.Int32
	errs := eachAtOnce(len(plan), rebalanceParallel, func(i int) error {
		if !r.active() { // paused, disabled or deposed meanwhile
			return nil
		}
		m := plan[i]
		if err := r.b.moveOnce(m.group, m.to, 0, time.Now().Add(moveTimeout)); err != nil {
			return err
		}
		done.Add(1)
		r.moves.Inc()
		return nil
	})
	attrs := []any{"moved", done.Load(), "planned", len(plan), "leaderships", countsText(v.counts)}
	failed := 0
	for i, err := range errs {
		if err != nil {
			r.cooldown[plan[i].group.Name()] = time.Now().Add(rebalanceRetry)
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
	return int(done.Load()), false
}

// leadView is a round's count: the groups each node that may lead leads, and those of them that
// may move now; unsettled when some group known here has no leader, or one that is down or has
// only just come up.
type leadView struct {
	counts    map[meta.NodeID]int
	movable   map[meta.NodeID][]movable
	unsettled bool
}

// movable is a group that may be moved, with the replica that should lead it.
type movable struct {
	group     meta.Assignment
	preferred meta.NodeID
}

// trackUp notes which nodes are up (this one, and those the link is connected to) and do not
// drain, since when.
func (r *rebalancer) trackUp(now time.Time) {
	cat, self := r.b.catalog(), r.b.nodeID()
	conn, _ := r.b.opts.Cluster.Network.(peerStates)
	heard, _ := r.b.opts.Cluster.Network.(peerHeard)
	silence := r.b.rebalanceSilence()
	up := map[meta.NodeID]bool{}
	for _, n := range cat.Nodes() {
		if n.Draining || n.ID != self && conn != nil && !conn.Connected(n.ID) {
			continue
		}
		if heard != nil && n.ID != self {
			// Connected but silent: a stopped process (SIGSTOP, a long pause) keeps its
			// connections. It has lost its leaderships meanwhile, so it would count as a
			// target; a transfer to it holds the group's writes up until the transfer fails.
			if at, ok := heard.Heard(n.ID); !ok || now.Sub(at) > silence {
				continue
			}
		}
		up[n.ID] = true
		if _, ok := r.upSince[n.ID]; !ok {
			r.upSince[n.ID] = now
		}
	}
	for id := range r.upSince {
		if !up[id] {
			delete(r.upSince, id)
		}
	}
}

// observe counts who leads each group, and remembers it for the next round.
func (r *rebalancer) observe(now time.Time) leadView {
	b := r.b
	cat := b.catalog()
	v := leadView{counts: map[meta.NodeID]int{}, movable: map[meta.NodeID][]movable{}}
	for id, since := range r.upSince {
		if now.Sub(since) >= rebalanceWarmup {
			v.counts[id] = 0
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
			if local && (id == "" || !cat.Draining(id)) {
				v.unsettled = true // no leader known, or it is down or just came up (a draining one's drain moves it)
			}
			continue
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
	r.seen = seen
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
