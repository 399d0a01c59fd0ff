package meta

import (
	"bytes"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
)

// A member's two addresses: the inter-node one the founders list, and the advertised one the
// node tells later. An empty address in a PutMember keeps what is recorded.
func TestMemberAddressesAreKeptApart(t *testing.T) {
	f := New(Config{Self: "n1"})
	c := f.Catalog()
	steps := []struct {
		cmd  queuelog.Frame
		want Node
	}{
		{PutNode(Node{ID: "n2", Address: "10.0.0.2:7000"}), Node{ID: "n2", Address: "10.0.0.2:7000"}},
		{PutNode(Node{ID: "n2", Advertise: "fila-2:5555"}), Node{ID: "n2", Address: "10.0.0.2:7000", Advertise: "fila-2:5555"}},
		{PutNode(Node{ID: "n2", Address: "10.0.0.9:7000"}), Node{ID: "n2", Address: "10.0.0.9:7000", Advertise: "fila-2:5555"}},
		{PutNode(Node{ID: "n2", Address: "a:1", Advertise: "b:2"}), Node{ID: "n2", Address: "a:1", Advertise: "b:2"}},
		// a log written before PutMember: the advertised address stays
		{&queuelog.PutNode{ID: "n2", Address: "c:3"}, Node{ID: "n2", Address: "c:3", Advertise: "b:2"}},
		{&queuelog.PutNode{ID: "n3", Address: "d:4"}, Node{ID: "n3", Address: "d:4"}},
	}
	for _, s := range steps {
		if err := apply(t, f, s.cmd); err != nil {
			t.Fatal(err)
		}
		if got, ok := c.Node(s.want.ID); !ok || got != s.want {
			t.Fatalf("after %+v: %+v, want %+v", s.cmd, got, s.want)
		}
	}
	if _, ok := c.Node("n9"); ok {
		t.Error("an unknown member was found")
	}
	g := New(Config{Self: "n2"})
	if err := restore(t, g, snapshotBytes(t, f)); err != nil {
		t.Fatal(err)
	}
	if got, want := g.Catalog().Nodes(), c.Nodes(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("restored %+v, had %+v", got, want)
	}
}

// A snapshot written before SnapshotMember lists members with SnapshotNode; it restores, the
// members without an advertised address, and snapshots again with SnapshotMember.
func TestOldSnapshotNodesRestore(t *testing.T) {
	var old []byte
	for _, fr := range []queuelog.Frame{
		&queuelog.SnapshotQueue{Definition: queue("q").AppendTo(nil)},
		&queuelog.SnapshotNode{ID: "n1", Address: "h1:7000"},
		&queuelog.SnapshotNode{ID: "n2", Address: "h2:7000"},
		&queuelog.SnapshotPlacement{Queue: "q", Replicas: []string{"n2", "n1"}},
		&queuelog.SnapshotEnd{Frames: 4},
	} {
		old = queuelog.AppendFrame(old, fr)
	}
	f := New(Config{Self: "n1"})
	if err := restore(t, f, old); err != nil {
		t.Fatal(err)
	}
	got := f.Catalog().Nodes()
	if want := []Node{{ID: "n1", Address: "h1:7000"}, {ID: "n2", Address: "h2:7000"}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("restored %+v, want %+v", got, want)
	}
	if a, ok := f.Catalog().Assignment("q"); !ok || a.PreferredLeader() != "n2" {
		t.Errorf("q's group %+v", a)
	}
	members := 0
	fr := wire.NewFrameReader(bytes.NewReader(snapshotBytes(t, f)), queuelog.HeaderSize, 64<<20)
	for {
		body, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch queuelog.Opcode(body[0]) {
		case queuelog.OpSnapshotNode:
			t.Error("a new snapshot holds a SnapshotNode")
		case queuelog.OpSnapshotMember:
			members++
		}
		if queuelog.Opcode(body[0]) == queuelog.OpSnapshotEnd {
			break
		}
	}
	if members != 2 {
		t.Errorf("the new snapshot lists %d members, want 2", members)
	}
}
