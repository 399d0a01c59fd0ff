package engine

import "testing"

func TestOldestReadyAndLeasedAt(t *testing.T) {
	q := newTestQueue(t, DefaultConfig())
	if _, ok := q.OldestReady(); ok {
		t.Fatal("an empty queue has an oldest ready message")
	}
	enqueue(t, q, 100, msg(1, "a", 1))
	enqueue(t, q, 200, msg(2, "b", 1), msg(3, "a", 1))
	if at, ok := q.OldestReady(); !ok || at != 100 {
		t.Fatalf("OldestReady = %d, %v; want 100", at, ok)
	}
	must(t, q.ApplyLease(Lease{ID: mid(1), Consumer: "c", LeasedAt: 300, ExpiresAt: 400}))
	if at, ok := q.OldestReady(); !ok || at != 200 {
		t.Fatalf("after leasing the oldest: OldestReady = %d, %v; want 200", at, ok)
	}
	if at, ok := q.LeasedAt(mid(1)); !ok || at != 300 {
		t.Fatalf("LeasedAt(leased) = %d, %v; want 300", at, ok)
	}
	if _, ok := q.LeasedAt(mid(2)); ok {
		t.Fatal("LeasedAt of a ready message")
	}
	if _, ok := q.LeasedAt(mid(9)); ok {
		t.Fatal("LeasedAt of an unknown message")
	}
	must(t, q.ApplyLease(Lease{ID: mid(2), Consumer: "c", LeasedAt: 300, ExpiresAt: 400}))
	must(t, q.ApplyLease(Lease{ID: mid(3), Consumer: "c", LeasedAt: 300, ExpiresAt: 400}))
	if _, ok := q.OldestReady(); ok {
		t.Fatal("everything is leased, yet OldestReady reports a message")
	}
}
