package throttle

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/server/keys"
)

// Fair shares of the bucket memory (share.go).

const hourMs = 3_600_000

var perKey = keys.Key{{Kind: keys.Header, Name: "k"}}

// fill takes one delivery for new keys of s's first throttle at now until one is refused, and
// returns how many were taken.
func fill(r *Registry, s *Subscription, prefix string, now int64) int {
	for i := 0; ; i++ {
		if ok, _ := r.Take(now, []Ref{{T: s.Throttles()[0], B: BucketKey{Group: fmt.Sprintf("%s%06d", prefix, i)}}}); !ok {
			return i
		}
	}
}

// One throttle keyed per message that has filled the whole bound does not starve another: the
// other still gets buckets, up to its half of the bound, from the first throttle's oldest. Before,
// the second throttle's first delivery waited for as long as the first throttle's keys stayed
// inside their hour.
func TestAThrottleAtTheBoundDoesNotStarveAnother(t *testing.T) {
	const bound = 200_000
	r := NewRegistry(bound)
	a, err := r.Declare("qa", []Declaration{{Name: "a", Key: perKey, Limits: []Limit{{1, hourMs}}}})
	if err != nil {
		t.Fatal(err)
	}
	filled := fill(r, a, "a", 1000)
	if filled == 0 {
		t.Fatal("the first throttle got no bucket")
	}
	b, err := r.Declare("qb", []Declaration{{Name: "b", Key: perKey, Limits: []Limit{{1, hourMs}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := fill(r, b, "b", 2000)
	per := a.Throttles()[0].newBucketMemory(BucketKey{Group: "a000000"})
	if want := int(bound/2/per) - 1; got < want {
		t.Fatalf("with the first throttle at the bound (%d buckets), the second got %d buckets, want at least %d (half the bound)", filled, got, want)
	}
	// Each holds its share, give or take a bucket (the second stops one short of passing its own).
	if share, held := r.Share("a"); held < share-per || held > share+per {
		t.Fatalf("the first throttle kept %d bytes, its share is %d", held, share)
	}
	if r.held > bound {
		t.Fatalf("the buckets hold %d bytes, past the bound of %d", r.held, bound)
	}
}

// Giving way keeps every limit exact: a key whose bucket was forgotten to make room for another
// throttle gets no second delivery within its hour, and neither does any new key of that
// throttle until the forgotten deliveries have left the window.
func TestGivingWayKeepsTheLimitsExact(t *testing.T) {
	r := NewRegistry(100_000)
	a, _ := r.Declare("qa", []Declaration{{Name: "a", Key: perKey, Limits: []Limit{{1, hourMs}}}})
	filled := fill(r, a, "a", 1000)
	b, _ := r.Declare("qb", []Declaration{{Name: "b", Key: perKey, Limits: []Limit{{1, hourMs}}}})
	if fill(r, b, "b", 2000) == 0 {
		t.Fatal("the second throttle got no bucket")
	}
	ta := a.Throttles()[0]
	for i := range filled {
		if ok, _ := r.Take(3000, []Ref{{T: ta, B: BucketKey{Group: fmt.Sprintf("a%06d", i)}}}); ok {
			t.Fatalf("key a%06d took a second delivery within its hour after giving way", i)
		}
	}
	ok, retryAt := r.Take(3000, []Ref{{T: ta, B: BucketKey{Group: "new"}}})
	if ok || retryAt < 1000+hourMs {
		t.Fatalf("a new key of the throttle that gave way: ok %v, retry at %d; want a wait until %d", ok, retryAt, 1000+hourMs)
	}
	if st, err := r.Bucket("a", BucketKey{Group: "a000000"}, 3000); err != nil || st.NextRoomAt < 1000+hourMs {
		t.Fatalf("a forgotten bucket reports next room at %d (%v), want %d or later", st.NextRoomAt, err, 1000+hourMs)
	}
	if ok, _ := r.Take(1000+hourMs, []Ref{{T: ta, B: BucketKey{Group: "a000000"}}}); !ok {
		t.Fatal("a forgotten key had no room once its hour was over")
	}
}

// The bound is split between holders before throttles: a holder with four throttles at the
// bound leaves another holder's one throttle half of it, not a fifth.
func TestSharesAreSplitByHolderFirst(t *testing.T) {
	const bound = 400_000
	r := NewRegistry(bound)
	for i := range 4 {
		s, err := r.DeclareAs("tenant-a", "qa", []Declaration{{Name: fmt.Sprint("a", i), Key: perKey, Limits: []Limit{{1, hourMs}}}})
		if err != nil {
			t.Fatal(err)
		}
		fill(r, s, "a", 1000)
	}
	b, err := r.DeclareAs("tenant-b", "qb", []Declaration{{Name: "b", Key: perKey, Limits: []Limit{{1, hourMs}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := fill(r, b, "b", 2000)
	per := b.Throttles()[0].newBucketMemory(BucketKey{Group: "b000000"})
	if want := int(bound/2/per) - 1; got < want {
		t.Fatalf("tenant b's throttle got %d buckets beside tenant a's four, want at least %d (half the bound)", got, want)
	}
	if share, _ := r.Share("a0"); share != bound/2/4 {
		t.Fatalf("each of tenant a's four throttles has a share of %d, want %d", share, bound/2/4)
	}
}

// A throttle within its share does not make others give way for a limit it adds to its buckets
// either: the declaration is accepted instead of refused with ErrFull.
func TestALimitAddedWithinTheShareTakesRoomFromOthers(t *testing.T) {
	r := NewRegistry(200_000)
	b, _ := r.Declare("qb", []Declaration{{Name: "b", Key: perKey, Limits: []Limit{{1, hourMs}}}})
	for i := range 10 {
		r.Take(1000, []Ref{{T: b.Throttles()[0], B: BucketKey{Group: fmt.Sprint("b", i)}}})
	}
	a, _ := r.Declare("qa", []Declaration{{Name: "a", Key: perKey, Limits: []Limit{{1, hourMs}}}})
	fill(r, a, "a", 1000)
	if _, err := r.Declare("qb", []Declaration{{Name: "b", Key: perKey, Limits: []Limit{{10, 24 * hourMs}}}}); err != nil {
		t.Fatalf("a limit added to a throttle of 10 buckets beside one at the bound: %v", err)
	}
	if r.held > 200_000 || r.held != heldNow(r) {
		t.Fatalf("held %d, the buckets hold %d", r.held, heldNow(r))
	}
}
