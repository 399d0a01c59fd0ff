package broker

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/auth"
)

// The meta log (queue definitions, runtime config, API keys and ACLs) and its snapshots reach a
// node from its peers and its disk. FuzzMetaApply applies arbitrary entries and FuzzMetaRestore
// restores arbitrary snapshots: nothing may panic, and every state reached must snapshot and
// restore to itself.

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "fuzz" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// metaState is what a meta FSM holds, in a comparable form.
type metaState struct {
	Queues []store.QueueRecord
	Config map[string]string
	Keys   []auth.Record
}

func stateOf(m *metaFSM) metaState {
	return metaState{m.definitions(), m.configCopy(), m.keys.List()}
}

func metaSnapshotBytes(t testing.TB, m *metaFSM) []byte {
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// metaRoundTrip restores m's snapshot into a fresh FSM and checks it holds m's state.
func metaRoundTrip(t *testing.T, m *metaFSM) {
	t.Helper()
	r := newMetaFSM()
	if err := r.Restore(io.NopCloser(bytes.NewReader(metaSnapshotBytes(t, m)))); err != nil {
		t.Fatalf("a meta state does not restore from its own snapshot: %v", err)
	}
	if diff := cmp.Diff(stateOf(m), stateOf(r), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("a meta state restored from its snapshot differs (-before +after):\n%s", diff)
	}
}

func metaEntry(fs ...queuelog.Frame) []byte {
	var b []byte
	for _, f := range fs {
		b = queuelog.AppendFrame(b, f)
	}
	return b
}

func metaSeeds() [][]byte {
	def := store.QueueRecord{Name: "orders"}
	dlq := store.QueueRecord{Name: "orders.dlq"}
	hash := bytes.Repeat([]byte{7}, 32)
	return [][]byte{
		metaEntry(putQueue(&def), putQueue(&dlq)),
		metaEntry(&queuelog.SetConfig{Key: "scheduler.quantum", Value: "3"}),
		metaEntry(&queuelog.PutAPIKey{ID: "key_a", Name: "a", SecretHash: hash, CreatedAt: 5}),
		metaEntry(&queuelog.SetACL{ID: "key_a", Permissions: []queuelog.ACLPermission{{Kind: "produce", Pattern: "orders*"}, {Kind: "admin", Pattern: "*"}}}),
		metaEntry(&queuelog.RevokeAPIKey{ID: "key_a"}, &queuelog.DropQueue{Name: "orders"}),
		metaEntry(&queuelog.SetACL{ID: "key_b", Permissions: []queuelog.ACLPermission{{Kind: "owner", Pattern: ""}}}),
	}
}

func FuzzMetaApply(f *testing.F) {
	var all []byte
	for _, e := range metaSeeds() {
		one := binary.BigEndian.AppendUint32(nil, uint32(len(e)))
		one = append(one, e...)
		f.Add(one)
		all = append(all, one...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, log []byte) {
		m := newMetaFSM()
		for i := 0; len(log) >= 4 && i < 64; i++ {
			n := min(int(binary.BigEndian.Uint32(log)), len(log)-4)
			_ = m.Apply(&raft.Log{Type: raft.LogCommand, Index: uint64(i + 1), Data: log[4 : 4+n : 4+n]})
			log = log[4+n:]
		}
		metaRoundTrip(t, m)
	})
}

func FuzzMetaRestore(f *testing.F) {
	m := newMetaFSM()
	f.Add(metaSnapshotBytes(f, m))
	for i, e := range metaSeeds() {
		m.Apply(&raft.Log{Type: raft.LogCommand, Index: uint64(i + 1), Data: e})
		f.Add(metaSnapshotBytes(f, m))
	}
	f.Fuzz(func(t *testing.T, snap []byte) {
		m := newMetaFSM()
		if err := m.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			return
		}
		metaRoundTrip(t, m)
		for i, e := range metaSeeds() {
			m.Apply(&raft.Log{Type: raft.LogCommand, Index: uint64(i + 1), Data: e})
		}
		metaRoundTrip(t, m)
	})
}
