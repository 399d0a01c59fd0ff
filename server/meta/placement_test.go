package meta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// spread returns the smallest and largest of the members' counts.
func spread(members []NodeID, count func(NodeID) int) (lo, hi int) {
	lo = count(members[0])
	hi = lo
	for _, id := range members[1:] {
		lo, hi = min(lo, count(id)), max(hi, count(id))
	}
	return lo, hi
}

// Queue groups created one after another on any number of members, with any replication, spread
// their preferred leaders so that the members' leader counts differ by at most one; each group
// has min(replication, members) distinct replicas; and two nodes applying the same log place
// alike.
func TestPlacementSpreadsLeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 300 {
		nodes := 1 + rng.IntN(7)
		replication := uint32(rng.IntN(5)) // 0 = the default, 3
		queues := 1 + rng.IntN(120)
		var members []NodeID
		f, twin := New(Config{Self: "n0"}), New(Config{Self: "n1"})
		for i := range nodes {
			id := NodeID(fmt.Sprintf("n%d", i))
			members = append(members, id)
			for _, x := range []*FSM{f, twin} {
				if err := apply(t, x, PutNode(Node{ID: id, Address: string(id)})); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := int(replication)
		if want == 0 {
			want = DefaultReplication
		}
		want = min(want, nodes)
		leads, replicas := map[NodeID]int{}, map[NodeID]int{}
		for q := range queues {
			name := fmt.Sprintf("q%03d", q)
			for _, x := range []*FSM{f, twin} {
				if err := apply(t, x, CreateQueue(queue(name), replication, 0)); err != nil {
					t.Fatal(err)
				}
			}
			a, _ := f.Catalog().Assignment(name)
			b, _ := twin.Catalog().Assignment(name)
			if !slices.Equal(a.Replicas, b.Replicas) {
				t.Fatalf("round %d: %s placed on %v and on %v", round, name, a.Replicas, b.Replicas)
			}
			if len(a.Replicas) != want || len(slices.Compact(slices.Sorted(slices.Values(a.Replicas)))) != want {
				t.Fatalf("round %d: %s on %v, want %d distinct replicas", round, name, a.Replicas, want)
			}
			leads[a.PreferredLeader()]++
			for _, id := range a.Replicas {
				replicas[id]++
			}
			if lo, hi := spread(members, func(id NodeID) int { return leads[id] }); hi-lo > 1 {
				t.Fatalf("round %d (%d nodes, replication %d): after %d queues leaders %v", round, nodes, replication, q+1, leads)
			}
			if lo, hi := spread(members, func(id NodeID) int { return replicas[id] }); hi-lo > 1 {
				t.Fatalf("round %d (%d nodes, replication %d): after %d queues replicas %v", round, nodes, replication, q+1, replicas)
			}
		}
	}
}

// The case: N queues on 3 nodes with replication 3.
func TestThreeNodesReplicationThree(t *testing.T) {
	f := New(Config{})
	for _, id := range []NodeID{"c", "a", "b"} {
		if err := apply(t, f, PutNode(Node{ID: id})); err != nil {
			t.Fatal(err)
		}
	}
	leads := map[NodeID]int{}
	for q := range 100 {
		if err := apply(t, f, CreateQueue(queue(fmt.Sprintf("q%d", q)), 3, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range f.Catalog().Assignments() {
		if len(a.Replicas) != 3 {
			t.Fatalf("%s on %v", a.Name(), a.Replicas)
		}
		leads[a.PreferredLeader()]++
	}
	if leads["a"] != 34 || leads["b"] != 33 || leads["c"] != 33 {
		t.Errorf("leaders %v, want a 34, b 33, c 33", leads)
	}
}

// A node that knows no member hosts every group itself, whatever the replication.
func TestNoMembersMeansSelf(t *testing.T) {
	f := New(Config{Self: "me"})
	if err := apply(t, f, CreateQueue(queue("a"), 3, 0), PutQueue(queue("b"))); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.Catalog().Assignments() {
		if !slices.Equal(a.Replicas, []NodeID{"me"}) || !a.Has("me") {
			t.Errorf("%s on %v", a.Name(), a.Replicas)
		}
	}
	if got := f.Catalog().AssignmentsFor("me"); len(got) != 2 {
		t.Errorf("me hosts %d groups", len(got))
	}
	if got := f.Catalog().AssignmentsFor("other"); len(got) != 0 {
		t.Errorf("other hosts %d groups", len(got))
	}
}

// Deleting a group gives its place back: the next group goes where it was.
func TestDeleteFreesItsPlace(t *testing.T) {
	f := New(Config{})
	for _, id := range []NodeID{"a", "b", "c"} {
		if err := apply(t, f, PutNode(Node{ID: id})); err != nil {
			t.Fatal(err)
		}
	}
	for q := range 6 {
		if err := apply(t, f, CreateQueue(queue(fmt.Sprintf("q%d", q)), 1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	gone, _ := f.Catalog().Assignment("q4")
	if err := apply(t, f, DeleteQueue("q4")); err != nil {
		t.Fatal(err)
	}
	if err := apply(t, f, CreateQueue(queue("next"), 1, 0)); err != nil {
		t.Fatal(err)
	}
	if a, _ := f.Catalog().Assignment("next"); !slices.Equal(a.Replicas, gone.Replicas) {
		t.Errorf("next on %v, want %v (where q4 was)", a.Replicas, gone.Replicas)
	}
}
