package meta

import (
	"bytes"
	"encoding/binary"
	"maps"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
)

// The meta log and its snapshots reach a node from its peers and its disk. FuzzApply applies
// arbitrary entries to two nodes and FuzzRestore restores arbitrary snapshots: nothing may panic,
// both nodes must reach one state, the catalog's counts must match what it holds, and every state
// reached must snapshot and restore to itself.

func seeds() [][]byte {
	def := store.QueueRecord{Name: "orders"}
	dlq := store.QueueRecord{Name: "orders.dlq", DLQOf: "orders"}
	hash := bytes.Repeat([]byte{7}, 32)
	return [][]byte{
		Entry(PutQueue(&def), PutQueue(&dlq)),
		Entry(CreateQueue(&store.QueueRecord{Name: "a"}, 2, 0), CreateQueue(&store.QueueRecord{Name: "b"}, 0, 3)),
		Entry(PutNode(Node{ID: "n1", Address: "x"}), PutNode(Node{ID: "n2"})),
		Entry(UpdateQueue(&store.QueueRecord{Name: "a", MaxAttempts: 4}), DeleteQueue("b")),
		Entry(&queuelog.SetConfig{Key: "scheduler.quantum", Value: "3"}),
		Entry(&queuelog.PutAPIKey{ID: "key_a", Name: "a", SecretHash: hash, CreatedAt: 5}),
		Entry(&queuelog.SetACL{ID: "key_a", Permissions: []queuelog.ACLPermission{{Kind: "produce", Pattern: "orders*"}}}),
		Entry(&queuelog.RevokeAPIKey{ID: "key_a"}, &queuelog.DropQueue{Name: "orders"}),
	}
}

// consistent checks that f's counts match what it holds.
func consistent(t *testing.T, f *FSM) {
	t.Helper()
	c := f.cat
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.groupNames()); n != c.groups {
		t.Fatalf("%d groups counted, %d held", c.groups, n)
	}
	for name := range c.placements {
		if q, ok := c.queues[name]; !ok || q.DLQOf != "" {
			t.Fatalf("a placement of %q, which is no group", name)
		}
	}
	loads := c.loads
	c.recount()
	if !maps.Equal(loads, c.loads) {
		t.Fatalf("loads %v, recounted %v", loads, c.loads)
	}
}

// roundTrip restores f's snapshot into a new FSM and checks that it snapshots alike.
func roundTrip(t *testing.T, f *FSM) {
	t.Helper()
	snap := snapshotBytes(t, f)
	r := New(Config{})
	if err := restore(t, r, snap); err != nil {
		t.Fatalf("a state does not restore from its own snapshot: %v", err)
	}
	consistent(t, r)
	if !bytes.Equal(snap, snapshotBytes(t, r)) {
		t.Fatal("a state restored from its snapshot snapshots differently")
	}
}

func FuzzApply(f *testing.F) {
	var all []byte
	for _, e := range seeds() {
		one := binary.BigEndian.AppendUint32(nil, uint32(len(e)))
		one = append(one, e...)
		f.Add(one)
		all = append(all, one...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, log []byte) {
		a, b := New(Config{Self: "n1"}), New(Config{Self: "n2", Reconciler: &events{}})
		for i := 0; len(log) >= 4 && i < 64; i++ {
			n := min(int(binary.BigEndian.Uint32(log)), len(log)-4)
			for _, x := range []*FSM{a, b} {
				x.Apply(&raft.Log{Type: raft.LogCommand, Index: uint64(i + 1), Data: bytes.Clone(log[4 : 4+n])})
			}
			log = log[4+n:]
		}
		consistent(t, a)
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("two nodes applying one log differ")
		}
		roundTrip(t, a)
	})
}

func FuzzRestore(f *testing.F) {
	x := New(Config{})
	f.Add(snapshotBytes(f, x))
	for i, e := range seeds() {
		x.Apply(&raft.Log{Type: raft.LogCommand, Index: uint64(i + 1), Data: e})
		f.Add(snapshotBytes(f, x))
	}
	f.Fuzz(func(t *testing.T, snap []byte) {
		x := New(Config{Reconciler: &events{}})
		if err := restore(t, x, snap); err != nil {
			return
		}
		consistent(t, x)
		roundTrip(t, x)
		for i, e := range seeds() {
			x.Apply(&raft.Log{Type: raft.LogCommand, Index: uint64(i + 1), Data: e})
		}
		consistent(t, x)
		roundTrip(t, x)
	})
}
