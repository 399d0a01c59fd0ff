package backoff

import (
	"testing"
	"time"
)

func TestBackoffDoublesUpToTheCapWithJitter(t *testing.T) {
	lo := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Rand: func() float64 { return 0 }}
	hi := lo
	hi.Rand = func() float64 { return 0.999999 }
	wantFull := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for n, full := range wantFull {
		full *= time.Millisecond
		if got := lo.Delay(n); got != full/2 {
			t.Errorf("Delay(%d) with rand 0 = %v, want %v", n, got, full/2)
		}
		if got := hi.Delay(n); got < full*99/100 || got >= full {
			t.Errorf("Delay(%d) with rand ~1 = %v, want just under %v", n, got, full)
		}
	}
	if got := lo.Delay(1 << 20); got != 500*time.Millisecond {
		t.Errorf("Delay of a huge attempt number = %v, want the cap's lower half", got)
	}
	mid := lo
	mid.Rand = func() float64 { return 0.5 }
	if got := mid.Delay(0); got != 75*time.Millisecond {
		t.Errorf("Delay(0) with rand 0.5 = %v, want 75ms", got)
	}
}
