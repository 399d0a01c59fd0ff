package throttle

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/keys"
)

// heldNow is what every bucket of r holds, counted afresh; -1 when a throttle's own count
// (Throttle.held) is not what its buckets hold.
func heldNow(r *Registry) int64 {
	var n int64
	for _, m := range []map[string]*Throttle{r.throttles, r.dormant} {
		for _, t := range m {
			var held int64
			for _, b := range t.buckets {
				held += b.memory()
			}
			if held != t.held {
				return -1
			}
			n += held
		}
	}
	return n
}

// The registry's count of bucket memory stays exact through declarations, deliveries with new
// keys, limit changes, ends, eviction and redeclaration under another key, and never passes the
// bound: new buckets wait, and declarations that would grow the buckets past it are refused. The
// one exception is an end that makes a hidden limit effective (it is never refused): the buckets
// may then hold more, and nothing but another end may grow them further.
func TestBucketMemoryIsCountedAndBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const bound = 20_000
		r := NewRegistry(bound)
		var live []*Subscription
		now := int64(0)
		key := keys.Key{{Kind: keys.Header, Name: "k"}}
		ceiling := int64(bound) // the bound, or what an end grew the buckets to
		for step := range rapid.IntRange(1, 300).Draw(t, "steps") {
			now += rapid.Int64Range(0, 50).Draw(t, "dt")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				d := Declaration{Name: fmt.Sprint("t", rapid.IntRange(0, 2).Draw(t, "name")), Key: key}
				for range rapid.IntRange(1, 3).Draw(t, "limits") {
					d.Limits = append(d.Limits, Limit{Max: rapid.Uint64Range(1, 100).Draw(t, "max"), WindowMs: rapid.Uint64Range(1, 100_000).Draw(t, "window")})
				}
				if rapid.Bool().Draw(t, "unkeyed") {
					d.Key = nil
				}
				if s, err := r.Declare("q", []Declaration{d}); err == nil {
					live = append(live, s)
				}
			case 1:
				if len(live) > 0 {
					i := rapid.IntRange(0, len(live)-1).Draw(t, "close")
					live[i].Close()
					live = append(live[:i], live[i+1:]...)
					ceiling = max(ceiling, heldNow(r))
				}
			default:
				if len(live) > 0 {
					s := live[rapid.IntRange(0, len(live)-1).Draw(t, "sub")]
					r.Take(now, []Ref{{s.Throttles()[0], BucketKey{Group: fmt.Sprint(step)}}})
				}
			}
			var live int64
			for _, n := range r.holders {
				live += n
			}
			if live != int64(len(r.throttles)) {
				t.Fatalf("step %d: the holders count %d live throttles, there are %d", step, live, len(r.throttles))
			}
			if got := heldNow(r); got != r.held || got > ceiling {
				t.Fatalf("step %d: counted %d bytes, the buckets hold %d (bound %d, grown by ends to %d)", step, r.held, got, bound, ceiling)
			}
		}
	})
}

// A limit declared on a throttle with many buckets gives each a window more: refused when that
// would pass the bound, accepted when dormant buckets can give way.
func TestLimitsThatWouldGrowTheBucketsPastTheBoundAreRefused(t *testing.T) {
	r := NewRegistry(20_000)
	key := keys.Key{{Kind: keys.Header, Name: "k"}}
	s, _ := r.Declare("q", []Declaration{{Name: "a", Key: key, Limits: []Limit{{1, 100_000}}}})
	for i := range 80 {
		r.Take(int64(i), []Ref{{s.Throttles()[0], BucketKey{Group: fmt.Sprint(i)}}})
	}
	more := []Declaration{{Name: "a", Key: key, Limits: []Limit{{70, 200_000}}}}
	if _, err := r.Declare("q", more); !errors.Is(err, ErrFull) {
		t.Fatalf("a limit growing %d buckets past the bound: %v (held %d)", len(s.Throttles()[0].buckets), err, r.held)
	}
	if r.held > 20_000 || r.held != heldNow(r) {
		t.Fatalf("held %d, buckets %d", r.held, heldNow(r))
	}
	s.Close() // dormant now: another throttle may take the room
	if _, err := r.Declare("q", []Declaration{{Name: "b", Key: key, Limits: []Limit{{1, 1000}}}}); err != nil {
		t.Fatal(err)
	}
}

// A bucket's count covers its windows themselves, not only their times and slots: a bucket of
// many small limits is mostly windows.
func TestBucketMemoryCountsItsWindows(t *testing.T) {
	var ls []Limit
	for i := range uint64(MaxLimits) {
		ls = append(ls, Limit{Max: 1 + i, WindowMs: 1 + i})
	}
	b := bucket{windows: make([]window, len(ls))}
	var times int64
	for i, l := range ls {
		b.windows[i] = newWindow(l)
		times += int64(8 * cap(b.windows[i].times))
	}
	if want := int64(unsafe.Sizeof(bucket{})) + int64(len(ls))*int64(unsafe.Sizeof(window{})) + times; b.memory() < want {
		t.Fatalf("a bucket of %d limits counted %d bytes, it holds at least %d", len(ls), b.memory(), want)
	}
}

// What a new bucket is counted as before it is made (newBucketMemory, checked against the bound)
// is what it holds once made, for exact and slotted windows alike.
func TestNewBucketMemoryIsWhatANewBucketHolds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, MaxLimits).Draw(t, "limits")
		th := &Throttle{}
		for range n {
			th.limits = append(th.limits, Limit{
				Max:      rapid.Uint64Range(1, 1<<20).Draw(t, "max"),
				WindowMs: rapid.Uint64Range(1, 1<<40).Draw(t, "window"),
			})
		}
		k := BucketKey{Group: rapid.String().Draw(t, "group")}
		if got, want := th.newBucketMemory(k), th.newBucket(k).memory(); got != want {
			t.Fatalf("limits %v: counted %d before the bucket was made, it holds %d", th.limits, got, want)
		}
	})
}

// A throttle declared again after its last subscription ended finds its dormant buckets as it
// left them, so reconnecting never resets a limit — also when the declaration needs more room
// than the bound has: it is refused rather than making room by forgetting the very buckets it
// revives. Before, it forgot them and was accepted, and each key could take its hour's one
// delivery again at once.
func TestRedeclaringADormantThrottleKeepsItsBuckets(t *testing.T) {
	hour, day := Limit{Max: 1, WindowMs: 3_600_000}, Limit{Max: 10, WindowMs: 86_400_000}
	key := keys.Key{{Kind: keys.Header, Name: "k"}}
	x := Declaration{Name: "x", Key: key, Limits: []Limit{hour}}
	const buckets = 20
	per := (&Throttle{limits: []Limit{hour}}).newBucketMemory(BucketKey{Group: "g00"})
	r := NewRegistry(buckets*per + per/2) // the buckets fit, a window more for each does not
	s, err := r.Declare("q", []Declaration{x})
	if err != nil {
		t.Fatal(err)
	}
	take := func(s *Subscription, now int64, group string) bool {
		ok, _ := r.Take(now, []Ref{{T: s.Throttles()[0], B: BucketKey{Group: group}}})
		return ok
	}
	for i := range buckets {
		if !take(s, 1000, fmt.Sprintf("g%02d", i)) {
			t.Fatalf("bucket %d of %d refused", i+1, buckets)
		}
	}
	s.Close() // x is dormant, its buckets count on
	if s2, err := r.Declare("q", []Declaration{{Name: "x", Key: key, Limits: []Limit{hour, day}}}); err == nil {
		if take(s2, 2000, "g00") {
			t.Fatal("declared again with a limit more, the throttle forgot its buckets: g00 took a second delivery within the hour")
		}
		s2.Close()
	} else if !errors.Is(err, ErrFull) {
		t.Fatalf("a declaration that does not fit the bound: %v, want ErrFull", err)
	}
	s3, err := r.Declare("q", []Declaration{x}) // as it was: no growth
	if err != nil {
		t.Fatal(err)
	}
	if take(s3, 2000, "g00") {
		t.Fatal("declared again as it was, the throttle forgot its buckets: g00 took a second delivery within the hour")
	}
}
