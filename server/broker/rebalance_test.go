package broker

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/meta"
)

// planCluster is a cluster for the planner: every group on every node of ids, led by leads[i]
// (the group's index i), preferring preferred[i] when given.
func planCluster(ids []meta.NodeID, leads []meta.NodeID, preferred []meta.NodeID) (map[meta.NodeID]int, map[meta.NodeID][]movable) {
	counts := map[meta.NodeID]int{}
	for _, id := range ids {
		counts[id] = 0
	}
	movables := map[meta.NodeID][]movable{}
	for i, l := range leads {
		counts[l]++
		p := ids[i%len(ids)]
		if preferred != nil {
			p = preferred[i]
		}
		a := meta.Assignment{Queue: store.QueueRecord{Name: fmt.Sprintf("q%d", i)}, Replicas: ids}
		movables[l] = append(movables[l], movable{group: a, preferred: p})
	}
	return counts, movables
}

// settle applies plans until none is made, and returns the counts and how many moves it took.
func settle(t *testing.T, counts map[meta.NodeID]int, movables map[meta.NodeID][]movable) (map[meta.NodeID]int, int) {
	t.Helper()
	moves := 0
	for round := 0; ; round++ {
		if round > 100 {
			t.Fatal("the plans never settle")
		}
		plan := planMoves(counts, movables, rebalanceMoves)
		if len(plan) == 0 {
			return counts, moves
		}
		for _, m := range plan {
			counts[m.from]--
			counts[m.to]++
			moves++
			var keep []movable
			for _, g := range movables[m.from] {
				if g.group.Name() != m.group.Name() {
					keep = append(keep, g)
				}
			}
			movables[m.from] = keep
			movables[m.to] = append(movables[m.to], movable{group: m.group, preferred: m.group.Replicas[0]})
		}
	}
}

func TestPlanMovesEvensOutWithTheFewestMoves(t *testing.T) {
	ids := []meta.NodeID{"1", "2", "3"}
	for _, tc := range []struct {
		name  string
		leads []int // groups each node leads
		moves int   // the fewest moves that even them out
	}{
		{"even", []int{4, 4, 4}, 0},
		{"off by one", []int{5, 4, 3}, 1},
		{"uneven by one each", []int{4, 4, 3}, 0},
		{"one node empty", []int{6, 6, 0}, 4},
		{"all on one", []int{12, 0, 0}, 8},
		{"measured", []int{1, 5, 6}, 3},
		{"not divisible", []int{5, 5, 0}, 3},
		{"two below", []int{6, 4, 2}, 2},
	} {
		var leads []meta.NodeID
		for i, n := range tc.leads {
			for range n {
				leads = append(leads, ids[i])
			}
		}
		counts, movables := planCluster(ids, leads, nil)
		got, moves := settle(t, counts, movables)
		lo, hi := 1<<30, -1
		for _, c := range got {
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi-lo > 1 || moves != tc.moves {
			t.Errorf("%s %v: settled at %v after %d moves, want counts within one after %d", tc.name, tc.leads, got, moves, tc.moves)
		}
	}
}

func TestPlanMovesPrefersThePreferredLeader(t *testing.T) {
	ids := []meta.NodeID{"1", "2", "3"}
	// Node 1 leads all three groups; q1 prefers node 2, q2 node 3: those two move home.
	counts, movables := planCluster(ids, []meta.NodeID{"1", "1", "1"}, []meta.NodeID{"1", "2", "3"})
	plan := planMoves(counts, movables, rebalanceMoves)
	got := map[string]meta.NodeID{}
	for _, m := range plan {
		got[m.group.Name()] = m.to
	}
	if len(plan) != 2 || got["q1"] != "2" || got["q2"] != "3" {
		t.Errorf("plan %v, want q1 to node 2 and q2 to node 3", got)
	}
}

func TestPlanMovesOnlyToReplicasAndWithinTheLimit(t *testing.T) {
	// Every group on nodes 1 and 2 only: node 3, which leads nothing, gets none of them.
	counts := map[meta.NodeID]int{"1": 10, "2": 0, "3": 0}
	movables := map[meta.NodeID][]movable{}
	for i := range 10 {
		a := meta.Assignment{Queue: store.QueueRecord{Name: fmt.Sprintf("q%d", i)}, Replicas: []meta.NodeID{"1", "2"}}
		movables["1"] = append(movables["1"], movable{group: a, preferred: "1"})
	}
	plan := planMoves(counts, movables, 3)
	if len(plan) != 3 {
		t.Fatalf("%d moves planned, want the limit of 3", len(plan))
	}
	for _, m := range plan {
		if m.to != "2" || m.from != "1" {
			t.Errorf("move %s from %s to %s, want from 1 to 2", m.group.Name(), m.from, m.to)
		}
	}
	// Nothing moves when the only node below the share replicates none of the groups.
	counts = map[meta.NodeID]int{"1": 5, "2": 5, "3": 0}
	if plan := planMoves(counts, map[meta.NodeID][]movable{"1": movables["1"][:5]}, 8); len(plan) != 0 {
		t.Errorf("planned %d moves to a node that is no replica", len(plan))
	}
}

// heardNode is a node's network that is connected to every peer and has heard from each
// lately, except those silent says are not.
type heardNode struct {
	memNode
	silent func(meta.NodeID) bool
}

func (h heardNode) Connected(meta.NodeID) bool { return true }

func (h heardNode) Heard(n meta.NodeID) (time.Time, bool) {
	if h.silent(n) {
		return time.Now().Add(-time.Minute), true
	}
	return time.Now(), true
}

// A node that is connected but silent — a stopped process keeps its connections — is not up
// for rebalancing, which would otherwise move leaderships to it (it leads none after its
// groups' elections) and hold each group's writes up until the transfer failed; heard from
// again, it is up, its warm-up starting afresh.
func TestRebalancingCountsASilentNodeDown(t *testing.T) {
	var mu sync.Mutex
	silent := map[meta.NodeID]bool{}
	c := startClusterWith(t, 150*time.Millisecond, func(c *memCluster, id meta.NodeID) Network {
		return heardNode{memNode: memNode{n: c.net, self: id}, silent: func(n meta.NodeID) bool {
			mu.Lock()
			defer mu.Unlock()
			return silent[n]
		}}
	})
	r := newRebalancer(c.brokers["n1"])
	up := func() []meta.NodeID { return slices.Sorted(maps.Keys(r.upSince)) }
	start := time.Now()
	r.trackUp(start)
	if got := up(); !slices.Equal(got, []meta.NodeID{"n1", "n2", "n3"}) {
		t.Fatalf("up: %v, want every node", got)
	}
	mu.Lock()
	silent["n2"] = true
	mu.Unlock()
	r.trackUp(time.Now())
	if got := up(); !slices.Equal(got, []meta.NodeID{"n1", "n3"}) {
		t.Fatalf("up with n2 silent: %v, want n1 and n3", got)
	}
	mu.Lock()
	silent["n2"] = false
	mu.Unlock()
	again := time.Now()
	r.trackUp(again)
	if got := up(); !slices.Equal(got, []meta.NodeID{"n1", "n2", "n3"}) {
		t.Fatalf("up with n2 heard again: %v, want every node", got)
	}
	if since := r.upSince["n2"]; !since.Equal(again) {
		t.Fatalf("n2 up since %v, want %v (its warm-up starts again)", since, again)
	}
}
