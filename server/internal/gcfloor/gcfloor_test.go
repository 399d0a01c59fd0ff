package gcfloor

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
)

func TestPercentMakesTheNextGoalTheFloor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{live: 2 * mib, floor: 64 * mib, want: 3100}, // 2 MiB × (1 + 31) = 64 MiB
		{live: 16 * mib, floor: 64 * mib, want: 300},
		{live: 32 * mib, floor: 64 * mib, want: 100}, // half the floor live: Go's default
		{live: 500 * mib, floor: 64 * mib, want: 100},
		{live: 0, floor: 64 * mib, want: 100},
	} {
		if got := Percent(tc.live, tc.floor); got != tc.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", tc.live, tc.floor, got, tc.want)
		}
	}
}

// gogc reads the runtime's current GOGC.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestStartRaisesGOGCAfterACollectionAndStopRestoresIt(t *testing.T) {
	if v, set := os.LookupEnv("GOGC"); set {
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", v) })
	}
	stop := Start(1 << 40) // far above any test's live heap
	raised := false
	for range 1000 { // the finalizer runs on its own goroutine after a collection
		runtime.GC()
		if gogc() > defaultPercent {
			raised = true
			break
		}
		runtime.Gosched()
	}
	stop()
	if !raised {
		t.Fatal("GOGC was not raised after collections with a live heap far below the floor")
	}
	if got := gogc(); got != defaultPercent {
		t.Fatalf("GOGC after stop = %d, want %d", got, defaultPercent)
	}
}

func TestStartLeavesAGOGCFromTheEnvironmentAlone(t *testing.T) {
	t.Setenv("GOGC", "100")
	stop := Start(1 << 40)
	defer stop()
	// As many collections, with the finalizer's goroutine given its turns, as the test above
	// needs to see GOGC raised: GOGC must stay put throughout.
	for range 100 {
		runtime.GC()
		runtime.Gosched()
		if got := gogc(); got != defaultPercent {
			t.Fatalf("GOGC = %d with GOGC set in the environment, want it left at %d", got, defaultPercent)
		}
	}
}
