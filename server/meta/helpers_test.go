package meta

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
)

// events records what a Reconciler heard, one line per call.
type events struct{ got []string }

func (e *events) Assign(a Assignment) {
	line := "assign " + a.Name() + " " + a.DeadLetter.Name + " ["
	for i, id := range a.Replicas {
		if i > 0 {
			line += " "
		}
		line += string(id)
	}
	e.got = append(e.got, line+"]")
}

func (e *events) Drop(queue string) { e.got = append(e.got, "drop "+queue) }

func (e *events) ConfigSet(k, v string) { e.got = append(e.got, "config "+k+"="+v) }

// take returns the events so far and forgets them.
func (e *events) take() []string {
	got := e.got
	e.got = nil
	return got
}

// applyAt applies cmds as one entry at index i.
func applyAt(f *FSM, i uint64, cmds ...queuelog.Frame) error {
	res := f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: Entry(cmds...)})
	if res == nil {
		return nil
	}
	return res.(error)
}

// apply applies cmds as one entry.
func apply(t testing.TB, f *FSM, cmds ...queuelog.Frame) error {
	t.Helper()
	return applyAt(f, 1, cmds...)
}

func queue(name string) *store.QueueRecord {
	return &store.QueueRecord{Name: name, CreatedAt: 1000, MaxAttempts: 3, OrderingKey: []byte{1, 2}}
}

// snapshotBytes persists f's snapshot.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	s.Release()
	return sink.Bytes()
}

func restore(t testing.TB, f *FSM, b []byte) error {
	t.Helper()
	return f.Restore(io.NopCloser(bytes.NewReader(b)))
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }
