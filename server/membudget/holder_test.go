package membudget

import (
	"errors"
	"testing"
)

// A holder opened without a cut (the broker's deduplication memory) is never picked to be cut,
// even when it holds the most, so the connection holding the most still is; TryReserve takes no
// headroom and cuts no one.
func TestAHolderWithoutACutIsNeverCut(t *testing.T) {
	b := New(100)
	var cut []string
	dedup := b.Open(1<<40, nil)
	conn := b.Open(100, func() { cut = append(cut, "conn") })
	if err := dedup.TryReserve(70); err != nil {
		t.Fatal(err)
	}
	if err := conn.Reserve(20); err != nil {
		t.Fatal(err)
	}
	var fe *FullError
	if err := dedup.TryReserve(20); !errors.As(err, &fe) || fe.Scope != ScopeServer || len(cut) != 0 {
		t.Fatalf("TryReserve past the budget: %v, cut %v", err, cut)
	}
	// A connection's reservation past the budget cuts the connection, not the larger holder.
	if err := conn.Reserve(20); err != nil && !errors.As(err, &fe) {
		t.Fatal(err)
	}
	if len(cut) != 1 || cut[0] != "conn" {
		t.Fatalf("cut %v, want [conn]", cut)
	}
	if dedup.Used() != 70 {
		t.Fatalf("the holder without a cut holds %d, want 70", dedup.Used())
	}
}
