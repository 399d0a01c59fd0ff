package engine

import (
	"errors"
	"maps"
	"testing"
)

// A parked message is stored and counted but never delivered, held or scheduled until Classify
// gives it a key, weight, time and attributes; a dead-letter queue keeps it unclassified but
// delivers it.
func TestUnclassifiedMessagesWaitForClassification(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	p := msg(1, "claim", 1)
	p.Unclassified = true
	must(t, q.ApplyEnqueue(Enqueue{At: 10, Msgs: []Message{p, msg(2, "k", 1)}}))
	must(t, q.Subscribe("c", 10))
	if ls := q.Dispatch(20, 10, nil); len(ls) != 1 || ls[0].ID != mid(2) {
		t.Fatalf("dispatched %v, want only the classified message", ls)
	}
	s := q.Stats()
	if s.Depth != 1 || s.Unclassified != 1 || s.OldestUnclassifiedAt != 10 {
		t.Fatalf("stats %+v", s)
	}
	q.Hold(30, 40)
	if m, _ := q.Get(mid(1)); m.State != StateUnclassified || !m.Unclassified {
		t.Fatalf("held a parked message: %+v", m)
	}
	if n, err := q.ApplyClassifyFailed(ClassifyFailed{ID: mid(1)}); err != nil || n != 1 {
		t.Fatalf("failed try: %d %v", n, err)
	}
	attrs := map[string]string{"tier": "gold"}
	must(t, q.ApplyClassify(Classify{ID: mid(1), At: 50, Class: Classification{FairnessKey: "tenant", Weight: 3, NotBefore: 50, Attributes: attrs}}))
	if err := q.ApplyClassify(Classify{ID: mid(1), At: 50}); !errors.Is(err, ErrNotUnclassified) {
		t.Fatalf("classifying twice: %v", err)
	}
	ls := q.Dispatch(60, 10, nil)
	if len(ls) != 1 || ls[0].ID != mid(1) {
		t.Fatalf("dispatched %v after classification", ls)
	}
	m, _ := q.Get(mid(1))
	if m.FairnessKey != "tenant" || m.Weight != 3 || m.Unclassified || !maps.Equal(m.Attributes, attrs) {
		t.Fatalf("classified message %+v", m)
	}
	if s := q.Stats(); s.Unclassified != 0 || s.OldestUnclassifiedAt != 0 {
		t.Fatalf("stats after classification %+v", s)
	}

	d := newTestQueue(t, DefaultConfig())
	d.DeliverUnclassified()
	must(t, d.ApplyEnqueue(Enqueue{At: 10, Msgs: []Message{p}}))
	must(t, d.Subscribe("c", 1))
	if ls := d.Dispatch(20, 1, nil); len(ls) != 1 {
		t.Fatal("a dead-letter queue did not deliver an unclassified message")
	}
	if m, _ := d.Get(mid(1)); !m.Unclassified {
		t.Fatal("the dead-letter queue forgot that the message is unclassified")
	}
}
