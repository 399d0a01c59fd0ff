package queuegroup

import (
	"bytes"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// TestHibernateChangesNothing: the leader's Hibernate entry applies on a replica and leaves its
// state as it was (the snapshot's bytes), with the fence moved on.
func TestHibernateChangesNothing(t *testing.T) {
	lead, replica := newState(t), newState(t)
	lead.Lead(1)
	lead.Record(true)
	lead.Enqueue(&queuelog.Enqueue{Lane: LaneQueue, At: 10, Messages: []queuelog.LogMessage{{ID: wire.UUID(engine.MsgID{15: 1}), Weight: 1, NotBefore: 10}}})
	first := lead.TakeEntry()
	lead.Hibernate(20)
	sleep := lead.TakeEntry()
	if sleep == nil {
		t.Fatal("Hibernate recorded no entry")
	}
	var ops []queuelog.Opcode
	if err := Frames(sleep, func(f queuelog.Frame) error { ops = append(ops, f.Opcode()); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0] != queuelog.OpFence || ops[1] != queuelog.OpHibernate {
		t.Fatalf("the entry holds %v, want a Fence and a Hibernate", ops)
	}
	if !Hibernates(sleep) || Hibernates(first) || Hibernates(nil) || Hibernates(sleep[:len(sleep)-9]) {
		t.Fatal("Hibernates tells another entry from one that puts the group to sleep")
	}
	if err := replica.ApplyEntry(first); err != nil {
		t.Fatal(err)
	}
	before := snapshotBytes(t, replica)
	if err := replica.ApplyEntry(sleep); err != nil {
		t.Fatal(err)
	}
	if replica.Fence() != lead.Fence() {
		t.Fatalf("fence %v after the Hibernate entry, the leader's %v", replica.Fence(), lead.Fence())
	}
	after := snapshotBytes(t, replica)
	// The snapshot records the fence: compare the states with the fences equal.
	again := newState(t)
	if err := again.ApplyEntry(first); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, snapshotBytes(t, again)) || len(after) != len(before) {
		t.Fatal("applying Hibernate changed the replica's state")
	}
}
