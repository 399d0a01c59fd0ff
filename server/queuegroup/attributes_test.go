package queuegroup

import (
	"bytes"
	"maps"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// A message's attributes are stored with it and survive everything that keeps the message: a
// replay of the log, a snapshot, dead-lettering and redrive.
func TestAttributesStayWithTheMessage(t *testing.T) {
	want := map[string]string{"tenant": "acme", "tier": "gold"}
	id := engine.MsgID{1}
	l := newState(t)
	l.Lead(1)
	l.Record(true)
	c := queuelog.Enqueue{At: 10, Messages: []queuelog.LogMessage{{ID: wire.UUID(id), FairnessKey: "k", Weight: 1, NotBefore: 10,
		Attributes: maps.Clone(want)}, {ID: wire.UUID{2}, FairnessKey: "k", Weight: 1, NotBefore: 10}}}
	if err := l.Enqueue(&c); err != nil {
		t.Fatal(err)
	}
	entry := l.TakeEntry()

	check := func(what string, s *State, lane Lane) {
		t.Helper()
		m, ok := s.Lane(lane).Get(id)
		if !ok {
			t.Fatalf("%s: message not stored in lane %v", what, lane)
		}
		if !maps.Equal(m.Attributes, want) {
			t.Fatalf("%s: attributes %v, want %v", what, m.Attributes, want)
		}
		if other, ok := s.Lane(LaneQueue).Get(engine.MsgID{2}); ok && other.Attributes != nil {
			t.Fatalf("%s: a message without attributes has %v", what, other.Attributes)
		}
	}
	check("leader", l, LaneQueue)

	r := newState(t)
	if err := r.ApplyEntry(entry); err != nil {
		t.Fatal(err)
	}
	check("replay", r, LaneQueue)

	restored, err := Restore(bytes.NewReader(snapshotBytes(t, l)), "q", "q.dlq")
	if err != nil {
		t.Fatal(err)
	}
	check("snapshot", restored, LaneQueue)

	q := l.Lane(LaneQueue)
	if err := q.Subscribe("c", 10); err != nil {
		t.Fatal(err)
	}
	if n := len(q.Dispatch(20, 10, nil)); n != 2 {
		t.Fatalf("dispatched %d, want 2", n)
	}
	if _, _, err := l.Fail(LaneQueue, engine.Fail{ID: id, At: 30, Error: "boom", DeadLetter: true, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	check("dead-lettered", l, LaneDeadLetter)
	if n, err := l.Redrive(40, []engine.MsgID{id}); err != nil || n != 1 {
		t.Fatalf("redrive: %d, %v", n, err)
	}
	check("redriven", l, LaneQueue)
}
