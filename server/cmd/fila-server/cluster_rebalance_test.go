package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Three real processes, every queue group on all three, twelve queues kept awake: with
// rebalancing enabled (the default) the leaderships settle at four per node. Disabled, leaderships
// moved by hand onto one node stay there for several of the rebalancer's rounds; paused, they stay
// while the pause lasts, and once it runs out they are spread again, four per node, by exactly as
// many moves as the surplus (the fewest possible), after which nothing moves. A node killed (kill
// -9) leaves the other two at 6/6, which stay; started again, it gets its four back, again by
// exactly the surplus. Moves are counted by fila_cluster_rebalance_moves_total.

// rebalanceRounds is a few of the rebalancer's rounds (server/broker's rebalanceTick is 2 s): how
// long the test watches for moves that must not come.
const rebalanceRounds = 7 * time.Second

// leaderships is each node's count of queue leaderships as node n's GetClusterStatus shows it.
func leaderships(t *testing.T, n *clusterProc) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, s := range clusterStatus(t, n).Nodes {
		out[int(s.NodeID)] = int(s.QueueLeaderships)
	}
	return out
}

// evenly reports whether every one of nodes shows each of ids leading per queues.
func evenly(t *testing.T, nodes []*clusterProc, ids []int, per int) bool {
	for _, n := range nodes {
		c := leaderships(t, n)
		for _, id := range ids {
			if c[id] != per {
				return false
			}
		}
	}
	return true
}

// rebalanceMoves is the sum of the nodes' fila_cluster_rebalance_moves_total.
func rebalanceMoves(t *testing.T, nodes []*clusterProc) int {
	t.Helper()
	sum := 0
	for _, n := range nodes {
		if v := scrape(t, n, "fila_cluster_rebalance_moves_total", ""); v > 0 {
			sum += int(v)
		}
	}
	return sum
}

// surplus is how many leaderships counts hold above per on any node: the fewest moves that even
// them out to per.
func surplus(counts map[int]int, per int) int {
	s := 0
	for _, c := range counts {
		s += max(0, c-per)
	}
	return s
}

// setRebalancing sends SetRebalancing to node n and fails the test unless it answers Ok.
func setRebalancing(t *testing.T, n *clusterProc, mode fibp.RebalancingMode, pauseMs uint64) {
	t.Helper()
	r, ok := admin(t, n, &fibp.SetRebalancing{Mode: mode, PauseMs: pauseMs}).(*fibp.SetRebalancingResult)
	if !ok || r.ErrorCode != fibp.CodeOk {
		t.Fatalf("SetRebalancing %v through node %d: %+v", mode, n.id, r)
	}
}

// steady watches for d that node n's counts stay want and no rebalancing move is made, while
// still() holds.
func steady(t *testing.T, nodes []*clusterProc, n *clusterProc, want map[int]int, moves int, d time.Duration, still func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end) && still(); time.Sleep(250 * time.Millisecond) {
		if got := leaderships(t, n); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("leaderships changed to %v from %v", got, want)
		}
		if m := rebalanceMoves(t, nodes); m != moves {
			t.Fatalf("%d rebalancing moves, want none (%d before)", m-moves, moves)
		}
	}
}

func TestRebalancingOnProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, addrs := formCluster(t, bin, "--queue-idle-timeout", "1h", "--http-listen", "127.0.0.1:0", "--log-level", "info")
	queues := []string{"orders"}
	for i := range 11 {
		q := fmt.Sprintf("q%d", i)
		if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		queues = append(queues, q)
	}
	for _, q := range queues { // every group has elected its leader
		enqueueOnLeader(t, nodes, q, "before")
	}
	ids := []int{1, 2, 3}
	waitFor(t, "rebalancing (enabled by default) spreads the leaderships 4/4/4", func() bool { return evenly(t, nodes, ids, 4) })

	// Disabled: moved onto one node by hand, the leaderships stay there.
	meta := nodes[clusterStatus(t, nodes[0]).MetaLeaderNodeID-1]
	var from, to *clusterProc // the two nodes that do not lead the meta group
	for _, n := range nodes {
		switch {
		case n == meta:
		case from == nil:
			from = n
		default:
			to = n
		}
	}
	setRebalancing(t, from, fibp.RebalancingDisabled, 0)
	waitFor(t, "every node shows rebalancing disabled", func() bool {
		for _, n := range nodes {
			if clusterStatus(t, n).Rebalancing != fibp.RebalancingDisabled {
				return false
			}
		}
		return true
	})
	for q, l := range routes(t, meta) {
		if l == uint64(from.id) {
			if code := move(t, meta, q, to.id); code != fibp.CodeOk {
				t.Fatalf("MoveQueueLeader %s to node %d: %v", q, to.id, code)
			}
		}
	}
	uneven := map[int]int{meta.id: 4, from.id: 0, to.id: 8}
	waitFor(t, "every node shows the moves", func() bool {
		for _, n := range nodes {
			if fmt.Sprint(leaderships(t, n)) != fmt.Sprint(uneven) {
				return false
			}
		}
		return true
	})
	moves := rebalanceMoves(t, nodes)
	steady(t, nodes, meta, uneven, moves, rebalanceRounds, func() bool { return true })

	// Paused: nothing moves until the pause runs out; then the leaderships spread again, by no
	// more moves than the surplus.
	setRebalancing(t, to, fibp.RebalancingPaused, 4000)
	st := clusterStatus(t, meta)
	if st.Rebalancing != fibp.RebalancingPaused || st.RebalancingPauseEndsAt == 0 {
		t.Fatalf("after a pause the meta leader shows %v until %d", st.Rebalancing, st.RebalancingPauseEndsAt)
	}
	ends := time.UnixMilli(int64(st.RebalancingPauseEndsAt))
	t.Logf("paused until %v (%v from now)", ends.Format(time.StampMilli), time.Until(ends).Round(time.Millisecond))
	steady(t, nodes, meta, uneven, moves, time.Minute, func() bool { return time.Until(ends) > 200*time.Millisecond })
	waitFor(t, "the pause ran out: rebalancing shows enabled", func() bool {
		return clusterStatus(t, meta).Rebalancing == fibp.RebalancingEnabled
	})
	start := time.Now()
	waitFor(t, "rebalancing resumed after the pause spreads the leaderships 4/4/4", func() bool { return evenly(t, nodes, ids, 4) })
	t.Logf("after the pause: 4/4/4 in %v", time.Since(start).Round(time.Millisecond))
	moves = evenedBy(t, nodes, meta, uneven, moves)

	// A node killed: the others take over its leaderships, and rebalancing evens them out (6/6)
	// and then leaves them; started again, the node gets four back.
	from.p.cmd.Process.Signal(syscall.SIGKILL)
	from.p.wait()
	live := []*clusterProc{meta, to}
	var before map[int]int
	waitFor(t, "the other two lead every queue, spread evenly", func() bool {
		before = leaderships(t, meta)
		return before[meta.id]+before[to.id] == len(queues) && before[meta.id] == before[to.id]
	})
	moves = rebalanceMoves(t, live)
	steady(t, live, meta, before, moves, rebalanceRounds/2, func() bool { return true })
	from.launch(t, bin, addrs[from.id-1], "--queue-idle-timeout", "1h", "--http-listen", "127.0.0.1:0", "--log-level", "info")
	from.addrs = waitAddrFile(t, from.addrFile, from.p)
	start = time.Now()
	waitFor(t, "the restarted node gets its share: 4/4/4", func() bool { return evenly(t, nodes, ids, 4) })
	t.Logf("after the restart: 4/4/4 in %v", time.Since(start).Round(time.Millisecond))
	evenedBy(t, nodes, meta, before, moves)
	for _, q := range queues {
		enqueueOnLeader(t, nodes, q, "after")
	}
}

// evenedBy checks that leaderships evened out from counts (4/4/4 now) took exactly as many
// rebalancing moves as their surplus, the fewest that could: it waits for the moves under way to
// be counted (a move counts once its answer is back at the meta leader, which may be after the
// target shows as leader), then watches several rounds for any further move. It returns the
// moves counted.
func evenedBy(t *testing.T, nodes []*clusterProc, meta *clusterProc, counts map[int]int, moves int) int {
	t.Helper()
	want := moves + surplus(counts, 4)
	waitFor(t, fmt.Sprintf("the %d moves that evened out %v are counted", surplus(counts, 4), counts), func() bool {
		return rebalanceMoves(t, nodes) >= want
	})
	steady(t, nodes, meta, map[int]int{1: 4, 2: 4, 3: 4}, want, rebalanceRounds, func() bool { return true })
	return want
}

// TestMeasureRebalance (FILA_MEASURE_REBALANCE=N only) creates N queues on three processes, kept
// awake, drains the node leading the most of them with rebalancing disabled, undrains it, and
// measures how long rebalancing, enabled then, takes to give it its share (every node's count
// within one of the others on the meta leader's GetClusterStatus), and how many moves it made
// against the surplus.
func TestMeasureRebalance(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_REBALANCE"))
	if n <= 0 {
		t.Skip("FILA_MEASURE_REBALANCE=N measures the rebalancing of N queues' leaderships after an undrain on three nodes")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin, "--queue-idle-timeout", "1h", "--http-listen", "127.0.0.1:0", "--log-level", "info")
	setRebalancing(t, nodes[0], fibp.RebalancingDisabled, 0)
	c := fibptest.Dial(t, nodes[0].addrs.FIBP)
	defer c.NC.Close()
	c.Handshake()
	queues := []string{"orders"}
	for i := range n - 1 {
		q := fmt.Sprintf("m%04d", i)
		if r := c.Call(uint32(i+2), &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		queues = append(queues, q)
	}
	waitFor(t, "every queue has a leader", func() bool { return leadsNone(t, nodes[0], queues, 0) })
	t.Logf("%d queues created: leaderships %v", n, leaderships(t, nodes[0]))
	drained := nodes[2]
	for _, drain := range []bool{true, false} {
		if r := admin(t, nodes[0], &fibp.DrainNode{NodeID: uint64(drained.id), Drain: drain}).(*fibp.DrainNodeResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("DrainNode(%v): %v", drain, r.ErrorCode)
		}
		waitUntil(t, 5*time.Minute, "the drain is done or cancelled", func() bool {
			s := nodeStatus(t, nodes[0], drained.id)
			return drain && s.QueueLeaderships == 0 || !drain && s.State == fibp.NodeStateUp
		})
	}
	meta := nodes[clusterStatus(t, nodes[0]).MetaLeaderNodeID-1]
	before, moves := leaderships(t, meta), rebalanceMoves(t, nodes)
	start := time.Now()
	setRebalancing(t, nodes[0], fibp.RebalancingEnabled, 0)
	waitUntil(t, 10*time.Minute, "the leaderships are spread evenly", func() bool {
		c := leaderships(t, meta)
		lo, hi := n, 0
		for _, v := range c {
			lo, hi = min(lo, v), max(hi, v)
		}
		return hi-lo <= 1
	})
	took, moved := time.Since(start), rebalanceMoves(t, nodes)-moves
	t.Logf("%d queues: from %v to %v in %v, %d moves (surplus over the even share %d)", n, before, leaderships(t, meta),
		took.Round(time.Millisecond), moved, surplus(before, n/3))
}
