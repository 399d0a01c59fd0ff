package engine

import (
	"slices"
	"testing"
)

// idsOf collects the IDs an iteration yields.
func idsOf(msgs func(func(Message) bool)) []MsgID {
	var ids []MsgID
	for m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids
}

// After continues in enqueue order after a stored message (an older ID enqueued later, as a
// dead-letter copy is, included); after one that has left, it yields the stored messages whose
// IDs sort after it. Newest is the last message in enqueue order.
func TestAfterPagesInEnqueueOrder(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	if _, ok := q.Newest(); ok {
		t.Fatal("an empty queue has a newest message")
	}
	enqueue(t, q, 1, msg(1, "a", 1), msg(2, "b", 1), msg(3, "a", 1), msg(4, "b", 1), msg(5, "a", 1))
	enqueue(t, q, 2, msg(0, "a", 1)) // an older ID, enqueued last
	if got, want := idsOf(q.After(mid(2))), []MsgID{mid(3), mid(4), mid(5), mid(0)}; !slices.Equal(got, want) {
		t.Fatalf("After(2) = %v, want %v", got, want)
	}
	if id, ok := q.Newest(); !ok || id != mid(0) {
		t.Fatalf("Newest = %v %v, want %v", id, ok, mid(0))
	}
	must(t, q.ApplyAck(Ack{ID: mid(3), At: 3}))
	if got, want := idsOf(q.After(mid(3))), []MsgID{mid(4), mid(5)}; !slices.Equal(got, want) {
		t.Fatalf("After(3) once 3 has left = %v, want %v", got, want)
	}
	if got := idsOf(q.After(mid(9))); len(got) != 0 {
		t.Fatalf("After an ID above every stored one = %v", got)
	}
	// Reading changes nothing: every message is still there, ready, at attempt 0.
	for m := range q.Messages() {
		if m.State != StateReady || m.Attempts != 0 {
			t.Fatalf("message %v is %v at attempt %d after After", m.ID, m.State, m.Attempts)
		}
	}
}
