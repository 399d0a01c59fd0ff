package meta

import (
	"errors"
	"slices"
	"testing"
)

// drains records the drains a DrainWatcher heard.
type drains struct {
	events
	got []Node
}

func (d *drains) DrainSet(id NodeID, draining bool) {
	d.got = append(d.got, Node{ID: id, Draining: draining})
}

// A member's drain is meta state: set and cleared by SetDraining, refused for an unknown node,
// kept by a PutMember of the same node, told to a DrainWatcher, and carried by snapshots.
func TestDrainingIsMetaState(t *testing.T) {
	w := &drains{}
	f := New(Config{Self: "1", Reconciler: w})
	c := f.Catalog()
	if err := apply(t, f, PutNode(Node{ID: "1", Address: "a:1"}), PutNode(Node{ID: "2", Address: "a:2"})); err != nil {
		t.Fatal(err)
	}
	var r *Refused
	if err := apply(t, f, SetDraining("9", true)); !errors.As(err, &r) || r.Code != CodeNodeNotFound {
		t.Fatalf("draining an unknown node: %v, want node_not_found", err)
	}
	if err := apply(t, f, SetDraining("2", true)); err != nil {
		t.Fatal(err)
	}
	if !c.Draining("2") || c.Draining("1") {
		t.Fatalf("draining: 1 %v, 2 %v", c.Draining("1"), c.Draining("2"))
	}
	if err := apply(t, f, PutNode(Node{ID: "2", Advertise: "b:2"})); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Node("2"); !n.Draining || n.Advertise != "b:2" {
		t.Fatalf("after PutMember: %+v", n)
	}
	g := New(Config{Self: "1"})
	if err := restore(t, g, snapshotBytes(t, f)); err != nil {
		t.Fatal(err)
	}
	if got, want := g.Catalog().Nodes(), c.Nodes(); !slices.Equal(got, want) {
		t.Fatalf("restored %+v, had %+v", got, want)
	}
	if err := apply(t, f, SetDraining("2", false)); err != nil {
		t.Fatal(err)
	}
	if c.Draining("2") {
		t.Fatal("undrained node still draining")
	}
	if want := []Node{{ID: "2", Draining: true}, {ID: "2", Draining: false}}; !slices.Equal(w.got, want) {
		t.Fatalf("watcher heard %+v, want %+v", w.got, want)
	}
}
