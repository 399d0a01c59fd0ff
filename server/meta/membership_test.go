package meta

import (
	"errors"
	"slices"
	"testing"
)

// removals records the members a MemberWatcher heard removed.
type removals struct {
	events
	got []NodeID
}

func (r *removals) MemberRemoved(id NodeID) { r.got = append(r.got, id) }

// RemoveMember: refused for an unknown node, a node not draining (unless forced) and the last
// member; a removed member's groups get another member, recorded as joining until
// ReplicaCaughtUp; the removed ID is not recorded again while groups may hold it (replace_test.go:
// until released); snapshots carry it all.
func TestRemoveMemberPlacesItsGroupsAgain(t *testing.T) {
	w := &removals{}
	f := New(Config{Self: "1", Reconciler: w})
	c := f.Catalog()
	for _, id := range []NodeID{"1", "2", "3", "4"} {
		if err := apply(t, f, PutNode(Node{ID: id, Address: "a:" + string(id)})); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		if err := apply(t, f, CreateQueue(queue(q), 3, 0)); err != nil {
			t.Fatal(err)
		}
	}
	var r *Refused
	for _, tc := range []struct {
		id    NodeID
		force bool
		code  Code
	}{{"9", false, CodeNodeNotFound}, {"9", true, CodeNodeNotFound}, {"2", false, CodeNodeNotDrained}} {
		if err := apply(t, f, RemoveMember(tc.id, tc.force)); !errors.As(err, &r) || r.Code != tc.code {
			t.Fatalf("RemoveMember(%s, %v): %v, want %v", tc.id, tc.force, err, tc.code)
		}
	}
	had := c.AssignmentsFor("2")
	if len(had) == 0 {
		t.Fatal("node 2 replicates no group")
	}
	w.take()
	if err := apply(t, f, SetDraining("2", true), RemoveMember("2", false)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Node("2"); ok || !c.Removed("2") {
		t.Fatal("node 2 is still a member, or not remembered as removed")
	}
	if got := w.take(); len(got) != len(had) {
		t.Fatalf("assigned %v, want the %d groups of node 2", got, len(had))
	}
	if !slices.Equal(w.got, []NodeID{"2"}) {
		t.Fatalf("watcher heard %v", w.got)
	}
	for _, a := range c.Assignments() {
		if a.Has("2") || len(a.Replicas) != 3 {
			t.Fatalf("%s placed on %v", a.Name(), a.Replicas)
		}
	}
	for _, old := range had {
		a, _ := c.Assignment(old.Name())
		if len(a.Joining) != 1 || !a.Has(a.Joining[0]) || old.Has(a.Joining[0]) {
			t.Fatalf("%s: replicas %v joining %v (were %v)", a.Name(), a.Replicas, a.Joining, old.Replicas)
		}
	}
	if n, g := c.Joining(); n != len(had) || g != len(had) {
		t.Fatalf("Joining() = %d, %d", n, g)
	}
	if err := apply(t, f, PutNode(Node{ID: "2", Address: "a:2"})); !errors.As(err, &r) || r.Code != CodeInvalidNode {
		t.Fatalf("PutMember of a removed ID: %v", err)
	}
	g := New(Config{Self: "1"})
	if err := restore(t, g, snapshotBytes(t, f)); err != nil {
		t.Fatal(err)
	}
	if !g.Catalog().Removed("2") || !slices.EqualFunc(g.Catalog().Assignments(), c.Assignments(), sameAssignment) {
		t.Fatal("the snapshot lost the removal or the joining replicas")
	}
	first, _ := c.Assignment(had[0].Name())
	if err := apply(t, f, ReplicaCaughtUp(first.Name(), first.Joining[0]), ReplicaCaughtUp(first.Name(), "1")); err != nil {
		t.Fatal(err)
	}
	if a, _ := c.Assignment(first.Name()); len(a.Joining) != 0 || !slices.Equal(a.Replicas, first.Replicas) {
		t.Fatalf("after ReplicaCaughtUp: %v joining %v", a.Replicas, a.Joining)
	}
	for _, id := range []NodeID{"1", "3"} {
		if err := apply(t, f, RemoveMember(id, true)); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range c.Assignments() {
		if !slices.Equal(a.Replicas, []NodeID{"4"}) {
			t.Fatalf("%s on %v with one member left", a.Name(), a.Replicas)
		}
	}
	if err := apply(t, f, RemoveMember("4", true)); !errors.As(err, &r) || r.Code != CodeLastMember {
		t.Fatalf("removing the last member: %v", err)
	}
}

func sameAssignment(a, b Assignment) bool {
	return a.Name() == b.Name() && slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.Joining, b.Joining)
}
