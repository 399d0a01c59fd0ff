package meta

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
)

// threeNodes is a catalog of members 1, 2, 3 with groups q1..q3 on all three.
func threeNodes(t *testing.T) *FSM {
	t.Helper()
	f := New(Config{Self: "1"})
	for _, id := range []NodeID{"1", "2", "3"} {
		if err := apply(t, f, PutNode(Node{ID: id, Address: "a:" + string(id)})); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"q1", "q2", "q3"} {
		if err := apply(t, f, CreateQueue(queue(q), 3, 0)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// A removed node leaves the meta group and every group it replicated; each ReplicaLeft (or a
// deletion) drops one; until none is left a PutMember under its ID is refused, then a fresh node
// (with its address) is a new member that tops up every group short of its replication.
func TestARemovedIDIsReleasedOnceEveryGroupLeftIt(t *testing.T) {
	f := threeNodes(t)
	c := f.Catalog()
	if err := apply(t, f, RemoveMember("3", true)); err != nil {
		t.Fatal(err)
	}
	if got := c.Leaving("3"); got != 4 {
		t.Fatalf("Leaving(3) = %d, want 3 groups and the meta group", got)
	}
	if got := c.MetaLeaving(); !slices.Equal(got, []NodeID{"3"}) {
		t.Fatalf("MetaLeaving() = %v", got)
	}
	for _, a := range c.Assignments() {
		if len(a.Replicas) != 2 || a.Has("3") || !slices.Equal(a.Leaving, []NodeID{"3"}) {
			t.Fatalf("%s: replicas %v leaving %v", a.Name(), a.Replicas, a.Leaving)
		}
	}
	var r *Refused
	if err := apply(t, f, PutNode(Node{ID: "3", Address: "a:3"})); !errors.As(err, &r) || r.Code != CodeInvalidNode ||
		!strings.Contains(r.Message, "4 groups") {
		t.Fatalf("PutMember while leaving: %v", err)
	}
	// A repeat, and a group that does not hold it, change nothing.
	if err := apply(t, f, ReplicaLeft("q1", "3"), ReplicaLeft("q1", "3"), ReplicaLeft("q2", "1"), ReplicaLeft(MetaGroupName, "3")); err != nil {
		t.Fatal(err)
	}
	if got := c.Leaving("3"); got != 2 {
		t.Fatalf("Leaving(3) = %d after q1 and the meta group left, want 2", got)
	}
	if err := apply(t, f, ReplicaLeft("q2", "3"), DeleteQueue("q3")); err != nil {
		t.Fatal(err)
	}
	if c.Leaving("3") != 0 || !c.Removed("3") {
		t.Fatalf("Leaving(3) = %d, removed %v: want released and still removed", c.Leaving("3"), c.Removed("3"))
	}
	if err := apply(t, f, PutNode(Node{ID: "3", Advertise: "c:3"})); !errors.As(err, &r) || r.Code != CodeInvalidNode {
		t.Fatalf("PutMember of a released ID without its address: %v", err)
	}
	if err := apply(t, f, CreateQueue(queue("q4"), 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := apply(t, f, PutNode(Node{ID: "3", Address: "a:3b"})); err != nil {
		t.Fatalf("PutMember of a released ID: %v", err)
	}
	if n, ok := c.Node("3"); !ok || n.Address != "a:3b" || c.Removed("3") {
		t.Fatalf("node 3: %+v %v, removed %v", n, ok, c.Removed("3"))
	}
	for _, a := range c.Assignments() {
		if a.Name() == "q4" {
			if a.Has("3") {
				t.Fatalf("q4 (replication 1) topped up: %v", a.Replicas)
			}
			continue
		}
		if len(a.Replicas) != 3 || a.Replicas[2] != "3" || !slices.Equal(a.Joining, []NodeID{"3"}) || len(a.Leaving) != 0 {
			t.Fatalf("%s: replicas %v joining %v leaving %v, want node 3 joining", a.Name(), a.Replicas, a.Joining, a.Leaving)
		}
	}
	// Placement counts the new replicas: the next group is led by node 3, which leads none.
	if err := apply(t, f, CreateQueue(queue("q5"), 1, 0)); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.Assignment("q5"); a.PreferredLeader() != "3" {
		t.Fatalf("q5 on %v", a.Replicas)
	}
}

// Snapshots carry the groups a removed node is leaving, and a released ID; a snapshot written
// before ReplicaLeft existed (SnapshotRemoved alone) restores its removed node as leaving the meta
// group and every group.
func TestSnapshotsCarryTheGroupsARemovedNodeLeaves(t *testing.T) {
	f := threeNodes(t)
	if err := apply(t, f, RemoveMember("3", true), ReplicaLeft("q1", "3"), SetDraining("2", true), RemoveMember("2", true)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []NodeID{"2"} {
		for _, g := range []string{MetaGroupName, "q1", "q2", "q3"} {
			if err := apply(t, f, ReplicaLeft(g, id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap := snapshotBytes(t, f)
	g := New(Config{Self: "1"})
	if err := restore(t, g, snap); err != nil {
		t.Fatal(err)
	}
	gc := g.Catalog()
	if gc.Leaving("3") != 3 || gc.Leaving("2") != 0 || !gc.Removed("2") || !gc.Removed("3") {
		t.Fatalf("restored: leaving(3)=%d leaving(2)=%d removed %v", gc.Leaving("3"), gc.Leaving("2"), gc.RemovedNodes())
	}
	if a, _ := gc.Assignment("q2"); !slices.Equal(a.Leaving, []NodeID{"3"}) {
		t.Fatalf("q2 leaving %v", a.Leaving)
	}
	if again := snapshotBytes(t, g); string(again) != string(snap) {
		t.Fatal("the restored state snapshots differently")
	}

	// An old snapshot: the queues, the member, node 3 removed, nothing of its groups.
	var old []byte
	n := uint64(0)
	for _, fr := range []queuelog.Frame{
		&queuelog.SnapshotQueue{Definition: queue("q1").AppendTo(nil)},
		&queuelog.SnapshotMember{ID: "1", Address: "a:1"},
		&queuelog.SnapshotRemoved{ID: "3"},
		&queuelog.SnapshotPlacement{Queue: "q1", Replicas: []string{"1"}},
	} {
		old = queuelog.AppendFrame(old, fr)
		n++
	}
	old = queuelog.AppendFrame(old, &queuelog.SnapshotEnd{Frames: n})
	h := New(Config{Self: "1"})
	if err := restore(t, h, old); err != nil {
		t.Fatal(err)
	}
	if got := h.Catalog().Leaving("3"); got != 2 {
		t.Fatalf("an old snapshot's removed node leaves %d groups, want q1 and the meta group", got)
	}
}
