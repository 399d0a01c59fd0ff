package queuegroup

import (
	"bytes"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// Why a message is in the dead-letter lane is kept from the command that moved it there: the
// leader, a replay of its log and a restore of its snapshot know the same; a redrive forgets it.
func TestDeadLetterReasonsSurviveReplayAndSnapshots(t *testing.T) {
	s := newState(t)
	s.Lead(1)
	s.Record(true)
	ids := []engine.MsgID{{1}, {2}, {3}}
	var entries [][]byte
	take := func() {
		if e := s.TakeEntry(); e != nil {
			entries = append(entries, e)
		}
	}
	c := queuelog.Enqueue{At: 10}
	for i, id := range ids {
		c.Messages = append(c.Messages, queuelog.LogMessage{ID: wire.UUID(id), FairnessKey: "k", Weight: 1, NotBefore: 10, Unclassified: i == 2})
	}
	if err := s.Enqueue(&c); err != nil {
		t.Fatal(err)
	}
	take()
	_ = s.Lane(LaneQueue).Subscribe("c", 0)
	s.LogLeases(LaneQueue, true)
	leases := s.Dispatch(LaneQueue, 20, 2, nil)
	if len(leases) != 2 {
		t.Fatalf("%d leases", len(leases))
	}
	take()
	for _, le := range leases { // newState's MaxAttempts is 2: a first failure retries
		f, err := s.Lane(LaneQueue).DecideFailure(le.ID, 30, "boom "+string('0'+le.ID[0]), nil)
		if err != nil {
			t.Fatal(err)
		}
		f.DeadLetter, f.Reason = true, "expired" // as the broker's limits do
		if le.ID == ids[0] {
			f.Reason = engine.ReasonScript
		}
		if _, _, err := s.Fail(LaneQueue, f); err != nil {
			t.Fatal(err)
		}
	}
	take()
	if _, err := s.Reclassify(40, []queuelog.Reclassified{{ID: wire.UUID(ids[2]), Outcome: queuelog.OutcomeDeadLetter, Error: "unclassified: no"}}); err != nil {
		t.Fatal(err)
	}
	take()
	want := map[engine.MsgID]DeadLetter{
		ids[0]: {Reason: engine.ReasonScript, Error: "boom 1", Attempts: 1, At: 30},
		ids[1]: {Reason: "expired", Error: "boom 2", Attempts: 1, At: 30},
		ids[2]: {Reason: ReasonUnclassified, Error: "unclassified: no", At: 40},
	}
	check := func(what string, st *State) {
		t.Helper()
		for id, w := range want {
			if got, ok := st.DeadLettered(id); !ok || got != w {
				t.Errorf("%s: message %d: %+v %v, want %+v", what, id[0], got, ok, w)
			}
		}
	}
	check("leader", s)

	replayed := newState(t)
	for _, e := range entries {
		if err := replayed.ApplyEntry(e); err != nil {
			t.Fatal(err)
		}
	}
	check("replay", replayed)
	restored, err := Restore(bytes.NewReader(snapshotBytes(t, s)), "q", "q.dlq")
	if err != nil {
		t.Fatal(err)
	}
	check("restored", restored)

	if _, err := s.Redrive(50, []engine.MsgID{ids[0]}); err != nil {
		t.Fatal(err)
	}
	if d, ok := s.DeadLettered(ids[0]); ok {
		t.Fatalf("a redriven message keeps its dead-letter record: %+v", d)
	}
	if len(s.why) != 2 {
		t.Fatalf("%d records for 2 dead letters", len(s.why))
	}
}
