package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeNemesis counts injections and heals, and fails a heal when told to.
type fakeNemesis struct {
	mu       sync.Mutex
	active   bool
	injected int
	healed   int
	failHeal int // the heal of this injection fails (0: none)
}

func (f *fakeNemesis) Inject(*rand.Rand) (string, func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active {
		return "", nil, errors.New("injected while a fault was active")
	}
	f.active = true
	f.injected++
	n := f.injected
	return fmt.Sprintf("fault %d", n), func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.active = false
		f.healed++
		if n == f.failHeal {
			return errors.New("the node would not come back")
		}
		return nil
	}, nil
}

// Schedule injects one fault at a time, heals each (the last when ctx ends) and records each as
// a Fault op from injection to heal.
func TestScheduleHealsAndRecordsEveryFault(t *testing.T) {
	f := &fakeNemesis{}
	rec := NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Schedule{Nemesis: f, Every: time.Millisecond, Hold: time.Millisecond}.Run(ctx, rec) }()
	for {
		f.mu.Lock()
		n := f.healed
		f.mu.Unlock()
		if n >= 5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.active || f.injected != f.healed {
		t.Fatalf("injected %d, healed %d, one still active: %v", f.injected, f.healed, f.active)
	}
	h := rec.History()
	if len(h) != f.injected {
		t.Fatalf("%d faults recorded, %d injected", len(h), f.injected)
	}
	for i, op := range h {
		if op.Kind != Fault || op.Outcome != Ok || op.Value != fmt.Sprintf("fault %d", i+1) || op.Complete < op.Invoke {
			t.Fatalf("fault %d recorded as %v", i+1, op)
		}
		if i > 0 && op.Invoke < h[i-1].Complete {
			t.Fatalf("fault %d began before fault %d was healed", i+1, i)
		}
	}
	if r := Check(h); r.Faults != len(h) || !r.OK() {
		t.Fatalf("faults alone: %v", violations(r))
	}
}

// A heal that fails ends the schedule with its error, recorded as a failed fault.
func TestScheduleStopsWhenAHealFails(t *testing.T) {
	f := &fakeNemesis{failHeal: 2}
	rec := NewRecorder()
	err := Schedule{Nemesis: f, Every: time.Millisecond, Hold: time.Millisecond}.Run(context.Background(), rec)
	if err == nil || f.injected != 2 {
		t.Fatalf("err %v after %d faults", err, f.injected)
	}
	h := rec.History()
	if len(h) != 2 || h[1].Outcome != Fail || h[1].Err != "the node would not come back" {
		t.Fatalf("history %v", h)
	}
}

// Partition cuts one node from the others and heals the same cut.
func TestPartitionCallsBack(t *testing.T) {
	var cuts, heals []string
	p := Partition{Nodes: []int{1, 2, 3},
		Cut:  func(n int, o []int) error { cuts = append(cuts, fmt.Sprint(n, o)); return nil },
		Heal: func(n int, o []int) error { heals = append(heals, fmt.Sprint(n, o)); return nil }}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		what, heal, err := p.Inject(rng)
		if err != nil {
			t.Fatal(err)
		}
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		if what == "" {
			t.Fatal("no description")
		}
	}
	if !slices.Equal(cuts, heals) {
		t.Fatalf("cuts %v, heals %v", cuts, heals)
	}
	for _, c := range cuts {
		if !slices.Contains([]string{"1 [2 3]", "2 [1 3]", "3 [1 2]"}, c) {
			t.Fatalf("cut %s is not one node from the others", c)
		}
	}
	if _, _, err := (Partition{Nodes: []int{1}}).Inject(rng); err == nil {
		t.Fatal("a partition of one node was injected")
	}
}
