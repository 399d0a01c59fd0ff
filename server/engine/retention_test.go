package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The limits' queries read the enqueue order: AcceptedBy stops at the first message accepted
// after the cutoff, OldestUnleased walks past leased messages, no further than asked; neither changes the queue.
func TestLimitQueriesReadTheEnqueueOrder(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	if _, ok := q.OldestAcceptedAt(); ok {
		t.Fatal("an empty queue has an oldest message")
	}
	enqueue(t, q, 1000, Message{ID: mid(1)}, Message{ID: mid(2)})
	enqueue(t, q, 2000, Message{ID: mid(3)})
	enqueue(t, q, 3000, Message{ID: mid(4), EnqueuedAt: 500}) // a redrive keeps its acceptance time
	if at, ok := q.OldestAcceptedAt(); !ok || at != 1000 {
		t.Fatalf("OldestAcceptedAt = %d, %v; want 1000", at, ok)
	}
	for _, tc := range []struct {
		cutoff int64
		n      int
		want   []MsgID
	}{
		{999, 10, nil},
		{1000, 10, []MsgID{mid(1), mid(2)}},
		{1000, 1, []MsgID{mid(1)}},
		{1500, 10, []MsgID{mid(1), mid(2)}}, // stops at 3: 4, accepted at 500, is behind it
		{3000, 10, []MsgID{mid(1), mid(2), mid(3), mid(4)}},
	} {
		if got := q.AcceptedBy(tc.cutoff, tc.n, nil); !cmp.Equal(tc.want, got) {
			t.Errorf("AcceptedBy(%d, %d) = %v, want %v", tc.cutoff, tc.n, got, tc.want)
		}
	}
	must(t, q.Subscribe("c", 0))
	if got := q.Dispatch(3000, 2, nil); len(got) != 2 {
		t.Fatalf("Dispatch leased %d, want 2", len(got))
	}
	for _, tc := range []struct {
		n, walk int
		want    []MsgID
	}{
		{2, 10, []MsgID{mid(3), mid(4)}},
		{2, 3, []MsgID{mid(3)}}, // the walk ends before 4
		{2, 2, nil},             // only leases within the walk
		{0, 10, nil},
	} {
		if got := q.OldestUnleased(tc.n, tc.walk, nil); !cmp.Equal(tc.want, got) {
			t.Errorf("OldestUnleased(%d, %d) = %v, want %v", tc.n, tc.walk, got, tc.want)
		}
	}
	must(t, checkInvariants(q))
}
