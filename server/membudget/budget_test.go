package membudget

import (
	"errors"
	"testing"
)

func TestAccountBound(t *testing.T) {
	b := New(1000)
	a := b.Open(100, nil)
	if err := a.Reserve(60); err != nil {
		t.Fatal(err)
	}
	var fe *FullError
	if err := a.Reserve(60); !errors.As(err, &fe) || fe.Scope != ScopeConnection || !fe.Retryable() {
		t.Fatalf("Reserve past the account's bound: %v", err)
	}
	if err := a.Reserve(200); !errors.As(err, &fe) || fe.Retryable() {
		t.Fatalf("Reserve larger than the bound: %v (retryable %v)", err, fe.Retryable())
	}
	if a.Used() != 60 || b.Used() != 60 {
		t.Fatalf("used %d / %d after refusals, want 60", a.Used(), b.Used())
	}
	a.Release(60)
	if a.Used() != 0 || b.Used() != 0 {
		t.Fatalf("used %d / %d after release", a.Used(), b.Used())
	}
}

func TestServerBudgetCutsTheLargestHolder(t *testing.T) {
	b := New(100)
	var cut []string
	big := b.Open(100, func() { cut = append(cut, "big") })
	small := b.Open(100, func() { cut = append(cut, "small") })
	if err := big.Reserve(80); err != nil {
		t.Fatal(err)
	}
	if err := small.Reserve(10); err != nil {
		t.Fatal(err)
	}
	// Past the budget: the largest holder is cut, the other goes on within the headroom.
	if err := small.Reserve(12); err != nil {
		t.Fatalf("a small holder was refused for another's use: %v", err)
	}
	if len(cut) != 1 || cut[0] != "big" {
		t.Fatalf("cut %v, want [big]", cut)
	}
	var fe *FullError
	if err := small.Reserve(20); !errors.As(err, &fe) || fe.Scope != ScopeServer || !fe.Retryable() {
		t.Fatalf("Reserve past the headroom: %v", err)
	}
	if err := big.Reserve(1); !errors.As(err, &fe) {
		t.Fatalf("the cut holder reserved more: %v", err)
	}
	if len(cut) != 1 {
		t.Fatalf("cut %v, want [big] once", cut)
	}
	// Owed memory is counted past the budget, bounded only by the account.
	if err := small.Hold(50); err != nil || b.Used() != 152 {
		t.Fatalf("Hold: %v, budget used %d", err, b.Used())
	}
	if err := small.Hold(50); !errors.As(err, &fe) || fe.Scope != ScopeConnection {
		t.Fatalf("Hold past the account: %v", err)
	}
	big.Release(80)
	big.Close()
	small.Release(72)
	if b.Used() != 0 {
		t.Fatalf("budget used %d after every release", b.Used())
	}
}

func TestNilAccountsCountNothing(t *testing.T) {
	var b *Budget
	a := b.Open(1, nil)
	if err := a.Reserve(1 << 40); err != nil {
		t.Fatal(err)
	}
	a.Release(1 << 40)
	a.Close()
	if a.Used() != 0 || b.Used() != 0 {
		t.Fatal("a nil account counted")
	}
}

func TestDefaultIsAFractionOfAvailableMemory(t *testing.T) {
	avail := Available()
	if avail <= 0 {
		t.Fatalf("Available = %d", avail)
	}
	if got := DefaultLimit(); got != avail/2 {
		t.Fatalf("DefaultLimit = %d of %d", got, avail)
	}
}

// BenchmarkReserveRelease is the cost of accounting one request: a reservation and its release,
// on connections in parallel sharing one budget.
func BenchmarkReserveRelease(b *testing.B) {
	budget := New(1 << 40)
	b.RunParallel(func(pb *testing.PB) {
		a := budget.Open(1<<30, nil)
		defer a.Close()
		for pb.Next() {
			if err := a.Reserve(100 << 10); err != nil {
				b.Fatal(err)
			}
			a.Release(100 << 10)
		}
	})
}
