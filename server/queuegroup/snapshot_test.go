package queuegroup

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
)

// Runs of plain ready messages are written as SnapshotRun frames, broken where the fairness key or
// weight changes and around any other message, and a restored state has every message as it was
// and writes the same snapshot.
func TestSnapshotRunsRestoreEveryMessage(t *testing.T) {
	s := newState(t)
	var n byte
	msg := func(key string, weight uint32, delay int64) queuelog.LogMessage {
		n++
		return queuelog.LogMessage{ID: wire.UUID{15: n}, FairnessKey: key, Weight: weight, NotBefore: 10 + delay}
	}
	c := queuelog.Enqueue{At: 10, Messages: []queuelog.LogMessage{
		msg("a", 1, 0), msg("a", 1, 0), msg("a", 1, 0), // one run
		msg("a", 1, 5),                 // delayed: a SnapshotMessage
		msg("b", 1, 0), msg("b", 1, 0), // a run of b
		msg("a", 2, 0), // another weight: its own run
	}}
	if err := s.Enqueue(&c); err != nil {
		t.Fatal(err)
	}
	c = queuelog.Enqueue{At: 20, Messages: []queuelog.LogMessage{msg("a", 1, -10)}} // ready at once, but not from acceptance
	if err := s.Enqueue(&c); err != nil {
		t.Fatal(err)
	}
	snap := snapshotBytes(t, s)

	var runs [][]byte // the last ID byte of each run's messages
	messages := 0
	fr := wire.NewFrameReader(bytes.NewReader(snap), queuelog.HeaderSize, maxSnapshotFrame)
	for {
		body, err := fr.Next()
		if err != nil {
			break
		}
		f, err := queuelog.Decode(queuelog.Opcode(body[0]), body[1:])
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *queuelog.SnapshotRun:
			var ids []byte
			for _, id := range f.Ids {
				ids = append(ids, id[15])
			}
			runs = append(runs, ids)
		case *queuelog.SnapshotMessage:
			messages++
		}
	}
	if want := [][]byte{{1, 2, 3}, {5, 6}, {7}}; !cmp.Equal(runs, want) || messages != 2 {
		t.Fatalf("runs %v and %d messages, want runs %v and 2 messages", runs, messages, want)
	}

	r, err := Restore(bytes.NewReader(snap), "q", "q.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Collect(r.Lane(LaneQueue).Messages()), slices.Collect(s.Lane(LaneQueue).Messages()); !cmp.Equal(got, want) {
		t.Fatalf("restored messages differ (-want +got):\n%s", cmp.Diff(want, got))
	}
	if !bytes.Equal(snapshotBytes(t, r), snap) {
		t.Fatal("the restored state writes another snapshot")
	}
}

// plain looks at every field of a SnapshotMessage: a message with any field a run does not keep
// set is not plain. (A field added to the frame later fails here until plain knows it.)
func TestPlainLooksAtEveryField(t *testing.T) {
	base := queuelog.SnapshotMessage{ID: wire.UUID{1}, FairnessKey: "k", Weight: 3, EnqueuedAt: 7, NotBefore: 7, State: queuelog.StateReady}
	if !plain(&base) {
		t.Fatal("a ready message deliverable from its acceptance is not plain")
	}
	kept := map[string]bool{"ID": true, "FairnessKey": true, "Weight": true, "EnqueuedAt": true}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if kept[f.Name] {
			continue
		}
		m := base
		v := reflect.ValueOf(&m).Elem().Field(i)
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(true)
		case reflect.String:
			v.SetString("x")
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(v.Uint() + 1)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
		default:
			t.Fatalf("field %s of kind %v: teach this test to set it", f.Name, v.Kind())
		}
		if plain(&m) {
			t.Errorf("a message with %s changed (%v) is still plain", f.Name, v.Interface())
		}
	}
}
