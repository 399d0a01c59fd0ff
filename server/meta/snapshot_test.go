package meta

import (
	"bytes"
	"slices"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/auth"
)

// full builds a catalog with every kind of state.
func full(t *testing.T, f *FSM) {
	t.Helper()
	h := auth.HashOf("s")
	cmds := []queuelog.Frame{
		PutQueue(queue("legacy")), // placed with the first member
		PutNode(Node{ID: "n1", Address: "h1:5555"}),
		PutNode(Node{ID: "n2", Address: "h2:5555"}),
		CreateQueue(queue("a"), 2, 0),
		CreateQueue(queue("b"), 0, 0),
		&queuelog.SetConfig{Key: "z", Value: "1"},
		&queuelog.SetConfig{Key: "a", Value: "2"},
		&queuelog.PutAPIKey{ID: "k1", Name: "ci", SecretHash: h[:], CreatedAt: 3, ExpiresAt: 9, Superadmin: true},
		&queuelog.SetACL{ID: "k1", Permissions: []queuelog.ACLPermission{{Kind: "consume", Pattern: "*"}}},
	}
	for _, c := range cmds {
		if err := apply(t, f, c); err != nil {
			t.Fatalf("%v: %v", c.Opcode(), err)
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	f := New(Config{Self: "n1"})
	full(t, f)
	snap := snapshotBytes(t, f)
	var ev events
	g := New(Config{Self: "n2", Reconciler: &ev})
	if err := restore(t, g, snap); err != nil {
		t.Fatal(err)
	}
	if again := snapshotBytes(t, g); !bytes.Equal(snap, again) {
		t.Fatal("the restored state snapshots differently")
	}
	fc, gc := f.Catalog(), g.Catalog()
	for _, pair := range [][2]any{
		{len(fc.Queues()), len(gc.Queues())}, {fc.Groups(), gc.Groups()}, {len(fc.Config()), len(gc.Config())},
		{len(fc.Nodes()), len(gc.Nodes())}, {len(fc.Keys().List()), len(gc.Keys().List())},
	} {
		if pair[0] != pair[1] {
			t.Errorf("restored %v, had %v", pair[1], pair[0])
		}
	}
	fa, ga := fc.Assignments(), gc.Assignments()
	for i := range fa {
		if fa[i].Name() != ga[i].Name() || !slices.Equal(fa[i].Replicas, ga[i].Replicas) || fa[i].Replication != ga[i].Replication {
			t.Errorf("restored %+v, had %+v", ga[i], fa[i])
		}
	}
	if r, _ := gc.Keys().Get("k1"); !r.Superadmin || r.ExpiresAt != 9 || len(r.ACL) != 1 {
		t.Errorf("restored key %+v", r)
	}
	// legacy, placed on n1 alone, was topped up by n2 (joining).
	want := []string{"assign a a.dlq [n2 n1]", "assign b b.dlq [n1 n2]", "assign legacy legacy.dlq [n1 n2]"}
	if got := ev.take(); !slices.Equal(got, want) {
		t.Errorf("restore told %q, want %q", got, want)
	}
	// Placement carries on from the restored loads as it would have.
	for _, x := range []*FSM{f, g} {
		if err := apply(t, x, CreateQueue(queue("c"), 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, g)) {
		t.Error("after a restore, the next CreateQueue placed differently")
	}
}

// A restore over a state tells the Reconciler which groups are gone and every group there is.
func TestRestoreTellsWhatChanged(t *testing.T) {
	var ev events
	f := New(Config{Reconciler: &ev})
	for _, n := range []string{"gone", "kept"} {
		if err := apply(t, f, CreateQueue(queue(n), 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	other := New(Config{})
	for _, n := range []string{"kept", "new"} {
		if err := apply(t, other, CreateQueue(queue(n), 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	ev.take()
	if err := restore(t, f, snapshotBytes(t, other)); err != nil {
		t.Fatal(err)
	}
	want := []string{"drop gone", "assign kept kept.dlq [local]", "assign new new.dlq [local]"}
	if got := ev.take(); !slices.Equal(got, want) {
		t.Errorf("heard %q, want %q", got, want)
	}
}

// oldSnapshot writes a snapshot as the broker's metaFSM did before this package: queue
// definitions, config entries and API keys, then the end.
func oldSnapshot(queues []store.QueueRecord, config [][2]string, keys []*queuelog.SnapshotAPIKey) []byte {
	var b []byte
	n := uint64(0)
	for i := range queues {
		b = queuelog.AppendFrame(b, &queuelog.SnapshotQueue{Definition: queues[i].AppendTo(nil)})
		n++
	}
	for _, kv := range config {
		b = queuelog.AppendFrame(b, &queuelog.SnapshotConfig{Key: kv[0], Value: kv[1]})
		n++
	}
	for _, k := range keys {
		b = queuelog.AppendFrame(b, k)
		n++
	}
	return queuelog.AppendFrame(b, &queuelog.SnapshotEnd{Frames: n})
}

func TestOldSnapshotRestores(t *testing.T) {
	h := auth.HashOf("s")
	old := oldSnapshot(
		[]store.QueueRecord{*queue("a"), {Name: "a.dlq", CreatedAt: 1000, DLQOf: "a"}, *queue("b")},
		[][2]string{{"k", "v"}, {"j", "w"}},
		[]*queuelog.SnapshotAPIKey{{ID: "k1", Name: "x", SecretHash: h[:], Permissions: []queuelog.SnapshotPermission{{Kind: "admin", Pattern: "a"}}}},
	)
	var ev events
	f := New(Config{Reconciler: &ev})
	if err := restore(t, f, old); err != nil {
		t.Fatal(err)
	}
	c := f.Catalog()
	if c.Groups() != 2 || len(c.Queues()) != 3 || len(c.Config()) != 2 || c.Keys().Len() != 1 || len(c.Nodes()) != 0 {
		t.Fatalf("restored %d groups, %d queues, %d config entries, %d keys, %d nodes", c.Groups(), len(c.Queues()), len(c.Config()), c.Keys().Len(), len(c.Nodes()))
	}
	if got, want := ev.take(), []string{"assign a a.dlq [local]", "assign b b.dlq [local]"}; !slices.Equal(got, want) {
		t.Errorf("heard %q, want %q", got, want)
	}
	// A state without members or placement snapshots in the old format (config sorted).
	sorted := oldSnapshot(
		[]store.QueueRecord{*queue("a"), {Name: "a.dlq", CreatedAt: 1000, DLQOf: "a"}, *queue("b")},
		[][2]string{{"j", "w"}, {"k", "v"}},
		[]*queuelog.SnapshotAPIKey{{ID: "k1", Name: "x", SecretHash: h[:], Permissions: []queuelog.SnapshotPermission{{Kind: "admin", Pattern: "a"}}}},
	)
	if got := snapshotBytes(t, f); !bytes.Equal(got, sorted) {
		t.Error("the state of an old snapshot does not snapshot in the old format")
	}
}

func TestBadSnapshotsAreRefused(t *testing.T) {
	f := New(Config{})
	full(t, f)
	snap := snapshotBytes(t, f)
	withoutEnd := oldSnapshot([]store.QueueRecord{*queue("x")}, nil, nil)
	withoutEnd = withoutEnd[:len(withoutEnd)-len(queuelog.AppendFrame(nil, &queuelog.SnapshotEnd{}))]
	for name, b := range map[string][]byte{
		"empty":       nil,
		"truncated":   snap[:len(snap)-3],
		"without end": withoutEnd,
		"wrong count": queuelog.AppendFrame(nil, &queuelog.SnapshotEnd{Frames: 1}),
		"a command":   append(queuelog.AppendFrame(nil, PutQueue(queue("x"))), queuelog.AppendFrame(nil, &queuelog.SnapshotEnd{Frames: 1})...),
	} {
		if err := restore(t, f, b); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
	if !bytes.Equal(snap, snapshotBytes(t, f)) {
		t.Error("a refused snapshot changed the state")
	}
}
