package queuegroup

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// A snapshot's bodies section carries the bodies of the messages the state holds, in either
// lane, and leaves out those the store holds for messages the state does not (acked, or enqueued
// after the snapshot's index); a reader gets the state, the index and every body back, and a
// reader of the state alone stops before them.
func TestSnapshotBodiesCarryTheStatesMessages(t *testing.T) {
	s := newState(t)
	id := func(n byte) wire.UUID { return wire.UUID{15: n} }
	c := queuelog.Enqueue{At: 10, Messages: []queuelog.LogMessage{{ID: id(1), NotBefore: 10}, {ID: id(2), NotBefore: 10}, {ID: id(3), NotBefore: 10}}}
	if err := s.Enqueue(&c); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(LaneQueue, engine.MsgID(id(2)), 11); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Fail(LaneQueue, engine.Fail{ID: engine.MsgID(id(3)), At: 12, DeadLetter: true, Reason: "max_attempts"}); err != nil {
		t.Fatal(err)
	}
	stored := []engine.MsgID{engine.MsgID(id(1)), engine.MsgID(id(2)), engine.MsgID(id(3)), engine.MsgID(id(4))} // 2 acked, 4 of a later entry
	body := func(id engine.MsgID) []byte { return []byte(fmt.Sprintf("payload %d", id[15])) }

	var b bytes.Buffer
	if err := s.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	stateOnly := bytes.Clone(b.Bytes())
	err := s.WriteBodies(&b, 42, func(fn BodyFunc) error {
		for _, id := range stored {
			if err := fn(id, map[string]string{"h": "v"}, body(id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	r := NewSnapshotReader(bytes.NewReader(b.Bytes()))
	got, err := r.State("q", "q.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, got), stateOnly) {
		t.Fatal("the restored state writes another snapshot")
	}
	applied, ok, err := r.Bodies()
	if err != nil || !ok || applied != 42 {
		t.Fatalf("Bodies = %d, %v, %v; want 42, true, nil", applied, ok, err)
	}
	var ids []byte
	err = r.EachBody(func(id engine.MsgID, h map[string]string, p []byte) error {
		if !bytes.Equal(p, body(id)) || h["h"] != "v" {
			t.Errorf("body of %d: %q %v", id[15], p, h)
		}
		ids = append(ids, id[15])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ids, []byte{1, 3}) {
		t.Fatalf("bodies of %v, want 1 (queue) and 3 (dead-letter lane)", ids)
	}

	// Restore reads the state of a snapshot with bodies, and a state-only one has no bodies.
	if _, err := Restore(bytes.NewReader(b.Bytes()), "q", "q.dlq"); err != nil {
		t.Fatal(err)
	}
	r = NewSnapshotReader(bytes.NewReader(stateOnly))
	if _, err := r.State("q", "q.dlq"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Bodies(); ok || err != nil {
		t.Fatalf("a snapshot without bodies: Bodies = %v, %v", ok, err)
	}

	// Bodies cut short are refused.
	r = NewSnapshotReader(bytes.NewReader(b.Bytes()[:b.Len()-5]))
	if _, err := r.State("q", "q.dlq"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Bodies(); err != nil {
		t.Fatal(err)
	}
	if err := r.EachBody(func(engine.MsgID, map[string]string, []byte) error { return nil }); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("truncated bodies: %v, want ErrBadSnapshot", err)
	}
}
