package queuegroup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// The queue log and its snapshots reach a replica from its peers and from disk, so their
// decoding is an input parser: these targets replay arbitrary entries and restore arbitrary
// snapshots. Neither may panic, and every state they reach must snapshot and restore to itself
// (a replica must be able to hand its state on, whatever its log held).

// seedLog is a short log a leader writes: enqueues (keyed, grouped, parked, delayed, with
// attributes), leases, an ack, an extend, failures up to a dead letter, a redrive, a
// reconfiguration, a reclassification, a classified redrive and a forget, one entry per step,
// with the leader's snapshot after each.
func seedLog(t fataler) (entries, snaps [][]byte) {
	s := newState(t)
	s.Lead(1)
	s.Record(true)
	now := int64(1000)
	take := func() {
		if e := s.TakeEntry(); e != nil {
			entries = append(entries, e)
			snaps = append(snaps, snapshotBytes(t, s))
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	id := func(n byte) wire.UUID { return wire.UUID{0: 1, 15: n} }
	must(s.Enqueue(&queuelog.Enqueue{At: now, Messages: []queuelog.LogMessage{
		{ID: id(1), FairnessKey: "a", Weight: 1},
		{ID: id(2), FairnessKey: "b", Weight: 2, Attributes: map[string]string{"tier": "gold"}},
		{ID: id(3), FairnessKey: "a", Weight: 1, NotBefore: now + 5, Grouped: true, Group: []byte("g")},
		{ID: id(4), FairnessKey: "c", Weight: 1, Identity: bytes.Repeat([]byte{7}, 16), DedupUntil: now + 50},
		{ID: id(5), Unclassified: true},
		{ID: id(6), FairnessKey: "a", Weight: 1, NotBefore: now}, // plain, as the broker enqueues: snapshots write runs
		{ID: id(7), FairnessKey: "a", Weight: 1, NotBefore: now},
		{ID: id(8), FairnessKey: "b", Weight: 1, NotBefore: now},
	}}))
	take()
	q := s.Lane(LaneQueue)
	_ = q.Subscribe("c", 0)
	s.LogLeases(LaneQueue, true)
	s.Dispatch(LaneQueue, now, 3, nil)
	take()
	var leased []engine.MsgID
	for m := range q.Messages() {
		if m.State == engine.StateLeased {
			leased = append(leased, m.ID)
		}
	}
	if len(leased) < 3 {
		t.Fatal("the seed leader leased fewer than 3 messages")
	}
	must(s.Ack(LaneQueue, leased[0], now+1))
	take()
	e, err := q.DecideExtend(leased[1], now+2, 100)
	must(err)
	must(s.Extend(LaneQueue, e, true))
	take()
	for attempt := 0; attempt < 2; attempt++ { // MaxAttempts is 2: the second failure dead-letters
		now += 100
		if attempt > 0 {
			s.Dispatch(LaneQueue, now, 10, nil)
		}
		f, err := q.DecideFailure(leased[2], now, "boom", nil)
		if err != nil {
			break
		}
		_, _, err = s.Fail(LaneQueue, f)
		must(err)
		take()
	}
	_ = q.Unsubscribe("c")
	var dead []engine.MsgID
	for m := range s.Lane(LaneDeadLetter).Messages() {
		dead = append(dead, m.ID)
	}
	_, err = s.Redrive(now, dead)
	must(err)
	take()
	cfg := engine.DefaultConfig()
	cfg.Quantum = 3
	must(s.Configure(LaneQueue, cfg))
	take()
	_, err = s.Reclassify(now, []queuelog.Reclassified{{ID: id(5), Outcome: queuelog.OutcomeClassified,
		Class: queuelog.Classification{FairnessKey: "d", Weight: 2, NotBefore: now, Attributes: map[string]string{"x": "y"}}}})
	must(err)
	take()
	must(s.Enqueue(&queuelog.Enqueue{Lane: LaneDeadLetter, At: now, Messages: []queuelog.LogMessage{{ID: id(9), FairnessKey: "z", Weight: 1},
		{ID: id(10), FairnessKey: "z", Weight: 1, NotBefore: now}}}))
	take()
	_, err = s.RedriveClassified(now, []queuelog.Redriven{{ID: id(9), Outcome: queuelog.OutcomePark}})
	must(err)
	take()
	s.Forget(now + 1000)
	take()
	return entries, snaps
}

// joinEntries frames entries as FuzzReplay reads them: each after its u32 length.
func joinEntries(entries [][]byte) []byte {
	var out []byte
	for _, e := range entries {
		out = binary.BigEndian.AppendUint32(out, uint32(len(e)))
		out = append(out, e...)
	}
	return out
}

// splitEntries reads what joinEntries writes; a length past the end takes the rest.
func splitEntries(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := int(binary.BigEndian.Uint32(b))
		b = b[4:]
		if n > len(b) {
			n = len(b)
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out
}

// roundTrip snapshots s, restores the snapshot and checks that the restored state snapshots to
// the same bytes; it returns the restored state.
func roundTrip(t *testing.T, s *State) *State {
	t.Helper()
	first := snapshotBytes(t, s)
	r, err := Restore(bytes.NewReader(first), "q", "q.dlq")
	if err != nil {
		t.Fatalf("a state reached by replay does not restore from its own snapshot: %v", err)
	}
	if second := snapshotBytes(t, r); !bytes.Equal(first, second) {
		t.Fatal("a state restored from its snapshot writes another snapshot")
	}
	return r
}

// drive works a state as a leader would after taking it over: it delivers, fails what expires
// and acks the rest, on both lanes. A restored or replayed state must take all of it.
func drive(s *State, now int64) {
	for l := LaneQueue; l <= LaneDeadLetter; l++ {
		q := s.Lane(l)
		_ = q.Subscribe("fz", 1000)
		for _, ls := range q.Dispatch(now, 100, nil) {
			_, _ = q.DecideExtend(ls.ID, now, 10)
		}
		for _, id := range q.Expired(now+1<<40, nil) {
			if f, err := q.DecideFailure(id, now+1<<40, "expired", nil); err == nil {
				_, _, _ = s.Fail(l, f)
			}
		}
		for _, m := range q.Oldest(100, nil) {
			_ = s.Ack(l, m.ID, now+1<<40)
		}
		_ = q.Unsubscribe("fz")
		_, _ = q.NextWakeup()
		_ = q.Stats()
	}
}

// FuzzReplay applies arbitrary log entries to a fresh state, as a replica or a restart does, and
// also to a state restored from a snapshot taken after the first cut of them. Entries may fail
// (the replica logs it and goes on); nothing may panic, the two replays must agree on every
// entry's outcome and end in the same state, and that state must snapshot and restore to itself.
//
// With cut's high bit clear, each entry of the input is an entry's commands only and is given
// the Fence that follows the last (so that mutations reach the commands); with it set, entries
// are taken as they are, Fence included.
func FuzzReplay(f *testing.F) {
	entries, _ := seedLog(f)
	commands := make([][]byte, len(entries))
	for i, e := range entries {
		commands[i] = e[queuelog.LengthSize+int(binary.BigEndian.Uint32(e)):]
	}
	f.Add(uint8(0x80), joinEntries(entries))
	f.Add(uint8(0x83), joinEntries(entries))
	f.Add(uint8(0), joinEntries(commands))
	for i := range entries {
		f.Add(uint8(i), joinEntries(commands[:i+1]))
	}
	f.Add(uint8(1), joinEntries([][]byte{commands[0], commands[0], commands[2]}))
	f.Fuzz(func(t *testing.T, cut uint8, log []byte) {
		es := splitEntries(log)
		if len(es) > 64 {
			es = es[:64]
		}
		if cut&0x80 == 0 {
			for i, e := range es {
				es[i] = append(queuelog.AppendFrame(nil, &queuelog.Fence{Epoch: 1, Seq: uint64(i + 1)}), e...)
			}
		}
		cut &= 0x7f
		k := int(cut) % (len(es) + 1)
		a, b := newState(t), newState(t)
		failed := make([]bool, len(es))
		for i, e := range es {
			failed[i] = a.ApplyEntry(e) != nil
			if i < k {
				_ = b.ApplyEntry(e)
			}
		}
		b = roundTrip(t, b)
		for i := k; i < len(es); i++ {
			if err := b.ApplyEntry(es[i]); (err != nil) != failed[i] {
				t.Fatalf("entry %d: after a snapshot at entry %d it applies with %v; replayed from the start, failed=%v", i, k, err, failed[i])
			}
		}
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatalf("the replay from a snapshot at entry %d ends in another state than the replay from the start", k)
		}
		r := roundTrip(t, a)
		drive(r, 1<<20)
		roundTrip(t, r)
	})
}

// FuzzRestore restores arbitrary bytes as a snapshot. It may only fail with ErrBadSnapshot; a
// snapshot it accepts must describe a state that snapshots to itself, takes the leader's work
// and the seed log's entries without a panic.
func FuzzRestore(f *testing.F) {
	entries, snaps := seedLog(f)
	for _, s := range snaps {
		f.Add(s)
	}
	f.Add(snapshotBytes(f, newState(f)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, snap []byte) {
		s, err := Restore(bytes.NewReader(snap), "q", "q.dlq")
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("Restore failed with %v, which is not ErrBadSnapshot", err)
			}
			return
		}
		r := roundTrip(t, s)
		for _, e := range entries {
			_ = r.ApplyEntry(e)
		}
		drive(r, 1<<20)
		roundTrip(t, r)
	})
}

// FuzzBodies splits an arbitrary entry's bodies out and joins them back, as the group's log store
// does around every entry, and reads the bodies it acks: nothing may panic, and an entry whose
// commands decode comes back with the same commands.
func FuzzBodies(f *testing.F) {
	entries, _ := seedLog(f)
	for _, e := range entries {
		f.Add(e)
	}
	withBodies := queuelog.AppendFrame(nil, &queuelog.Fence{Epoch: 1, Seq: 1})
	withBodies = queuelog.AppendFrame(withBodies, &queuelog.Enqueue{At: 5, Messages: []queuelog.LogMessage{
		{ID: wire.UUID{1}, FairnessKey: "k", Weight: 1, Headers: map[string]string{"h": "v"}, Payload: []byte("body")},
		{ID: wire.UUID{2}, FairnessKey: "k", Weight: 1, Payload: []byte("second")}}})
	f.Add(withBodies)
	f.Fuzz(func(t *testing.T, entry []byte) {
		_ = Deleted(entry, func(engine.MsgID) {})
		type body struct {
			headers map[string]string
			payload []byte
		}
		bodies := map[engine.MsgID]body{}
		split, err := Bodies{}.Split(entry, func(id [16]byte, h map[string]string, p []byte) { bodies[id] = body{h, p} })
		if err != nil {
			return
		}
		joined, err := Bodies{}.Join(split, func(id [16]byte) (map[string]string, []byte, bool) {
			b, ok := bodies[id]
			return b.headers, b.payload, ok
		})
		if err != nil {
			t.Fatalf("a split entry does not join: %v", err)
		}
		var before, after []queuelog.Frame
		errBefore := Frames(entry, func(f queuelog.Frame) error { before = append(before, f); return nil })
		errAfter := Frames(joined, func(f queuelog.Frame) error { after = append(after, f); return nil })
		if errBefore != nil {
			return
		}
		if errAfter != nil {
			t.Fatalf("an entry that decodes does not decode after a split and a join: %v", errAfter)
		}
		if !uniqueIDs(before) {
			return // a later message's body replaces an earlier one's of the same ID
		}
		if diff := cmp.Diff(before, after, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("a split and a join changed the entry's commands (-before +after):\n%s", diff)
		}
	})
}

// uniqueIDs reports whether no two enqueued messages of frames share an ID.
func uniqueIDs(frames []queuelog.Frame) bool {
	seen := map[wire.UUID]bool{}
	for _, f := range frames {
		if e, ok := f.(*queuelog.Enqueue); ok {
			for _, m := range e.Messages {
				if seen[m.ID] {
					return false
				}
				seen[m.ID] = true
			}
		}
	}
	return true
}
