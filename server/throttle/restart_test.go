package throttle

import (
	"testing"
)

// After Restarted(at), buckets the registry never saw start full until at plus the throttle's
// largest window: deliveries before the restart (a previous process's) may be inside it. Before,
// a restarted throttle delivered N again at once: 2N within one window.
func TestARestartedRegistryStartsEveryBucketFull(t *testing.T) {
	const restart, minute = 100_000, 60_000
	r := NewRegistry(0)
	r.Restarted(restart)
	s, err := r.Declare("q", []Declaration{{Name: "api", Key: perKey, Limits: []Limit{{3, minute}}}})
	if err != nil {
		t.Fatal(err)
	}
	take := func(now int64, key string) (bool, int64) {
		return r.Take(now, []Ref{{T: s.Throttles()[0], B: BucketKey{Group: key}}})
	}
	for _, now := range []int64{restart, restart + 1, restart + minute - 1} {
		if ok, retryAt := take(now, "k"); ok || retryAt != restart+minute {
			t.Fatalf("at %d, within a minute of the restart: ok %v, retry at %d; want a wait until %d", now, ok, retryAt, restart+minute)
		}
	}
	if st, _ := r.Bucket("api", BucketKey{Group: "k"}, restart+10); st.NextRoomAt != restart+minute {
		t.Fatalf("the bucket reports next room at %d, want %d", st.NextRoomAt, restart+minute)
	}
	for i := range 3 {
		if ok, _ := take(restart+minute, "k"); !ok {
			t.Fatalf("delivery %d of 3 refused once the restart's minute was over", i+1)
		}
	}
	if ok, _ := take(restart+minute, "k"); ok {
		t.Fatal("a fourth delivery within the minute")
	}
	// A longer limit declared later cannot count the deliveries before the restart either: keys
	// new to it wait for its window, from the restart.
	if _, err := r.Declare("q", []Declaration{{Name: "api", Key: perKey, Limits: []Limit{{5, 10 * minute}}}}); err != nil {
		t.Fatal(err)
	}
	if ok, retryAt := take(restart+2*minute, "other"); ok || retryAt != restart+10*minute {
		t.Fatalf("a new key under a ten-minute limit two minutes after the restart: ok %v, retry at %d", ok, retryAt)
	}
	// A registry that was not restarted has room at once.
	fresh := NewRegistry(0)
	f, _ := fresh.Declare("q", []Declaration{{Name: "api", Key: perKey, Limits: []Limit{{3, minute}}}})
	if ok, _ := fresh.Take(restart, []Ref{{T: f.Throttles()[0], B: BucketKey{Group: "k"}}}); !ok {
		t.Fatal("a registry never restarted refused a first delivery")
	}
}
