package throttle

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/keys"
)

func decl(name string, limits ...Limit) Declaration {
	return Declaration{Name: name, Limits: limits}
}

func TestValidateRefusesEveryMalformedDeclaration(t *testing.T) {
	per := func(n, w uint64) Limit { return Limit{Max: n, WindowMs: w} }
	cases := map[string][]Declaration{
		"no limits":          {decl("a")},
		"zero max":           {decl("a", per(0, 1000))},
		"zero window":        {decl("a", per(5, 0))},
		"empty name":         {decl("", per(5, 1000))},
		"name repeated":      {decl("a", per(5, 1000)), decl("a", per(6, 1000))},
		"key kind 3":         {{Name: "a", Limits: []Limit{per(1, 1)}, Key: keys.Key{{Kind: keys.IdempotencyKey}}}},
		"key kind 4":         {{Name: "a", Limits: []Limit{per(1, 1)}, Key: keys.Key{{Kind: keys.PayloadHash}}}},
		"key kind 5":         {{Name: "a", Limits: []Limit{per(1, 1)}, Key: keys.Key{{Kind: keys.HeadersHash}}}},
		"unknown kind":       {{Name: "a", Limits: []Limit{per(1, 1)}, Key: keys.Key{{Kind: 9}}}},
		"header no name":     {{Name: "a", Limits: []Limit{per(1, 1)}, Key: keys.Key{{Kind: keys.Header}}}},
		"unknown policy":     {{Name: "a", Limits: []Limit{per(1, 1)}, WhenKeyMissing: 2}},
		"implied limit":      {decl("a", per(10, 1000), per(20, 1000))},
		"implied by longer":  {decl("a", per(10, 60000), per(10, 1000))},
		"implied, reordered": {decl("a", per(10, 1000), per(5, 2000))},
		"same limit twice":   {decl("a", per(10, 1000), per(10, 1000))},
	}
	for name, ds := range cases {
		if err := Validate(ds); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
		if _, err := NewRegistry(0).Declare("q", ds); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Declare = %v, want ErrInvalid", name, err)
		}
	}
	ok := []Declaration{decl("a", per(100, 1000), per(1000, 60000)), {Name: "b", Limits: []Limit{per(5, 1000)},
		Key: keys.Key{{Kind: keys.Header, Name: "merchant"}}, WhenKeyMissing: Unthrottled}}
	if err := Validate(ok); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}
}

func TestEffectiveLimitsAreTheUnionLessNeverApplying(t *testing.T) {
	r := NewRegistry(0)
	s1, err := r.Declare("q1", []Declaration{decl("api", Limit{100, 1000})})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := r.Declare("q2", []Declaration{decl("api", Limit{150, 1000}, Limit{1000, 60000})})
	if err != nil {
		t.Fatal(err)
	}
	s3, err := r.Declare("q2", []Declaration{decl("api", Limit{50, 500})})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := r.Stats("api", 0)
	// 150/1000 is implied by 100/1000; 50/500 is implied by 100/1000? No: 100 > 50. Both stay.
	want := []Limit{{50, 500}, {100, 1000}, {1000, 60000}}
	if !slices.Equal(st.Limits, want) || st.Subscribers != 3 || !slices.Equal(st.Queues, []string{"q1", "q2"}) {
		t.Fatalf("stats = %+v, want limits %v, 3 subscribers on q1, q2", st, want)
	}
	if aff := s1.Close(); !slices.Equal(aff, []string{"q2"}) {
		t.Fatalf("Close affected %v, want [q2]", aff)
	}
	st, _ = r.Stats("api", 0)
	if want := []Limit{{50, 500}, {150, 1000}, {1000, 60000}}; !slices.Equal(st.Limits, want) {
		t.Fatalf("after close: limits %v, want %v", st.Limits, want)
	}
	s2.Close()
	s3.Close()
	s3.Close()
	if _, err := r.Stats("api", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stats after the last subscription = %v, want ErrNotFound", err)
	}
	if got := r.QueueThrottles("q2"); len(got) != 0 {
		t.Fatalf("QueueThrottles after close = %v", got)
	}
}

func TestConflictOnAnotherKeyOrPolicy(t *testing.T) {
	r := NewRegistry(0)
	merchant := keys.Key{{Kind: keys.Header, Name: "merchant"}}
	base := Declaration{Name: "m", Limits: []Limit{{5, 1000}}, Key: merchant}
	if _, err := r.Declare("q", []Declaration{base}); err != nil {
		t.Fatal(err)
	}
	other := base
	other.Key = keys.Key{{Kind: keys.FairnessKey}}
	policy := base
	policy.WhenKeyMissing = Unthrottled
	unkeyed := base
	unkeyed.Key = nil
	for _, d := range []Declaration{other, policy, unkeyed} {
		// A valid declaration first, so that nothing is registered when the conflict is found.
		_, err := r.Declare("q2", []Declaration{decl("fresh", Limit{1, 1}), d})
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("Declare(%+v) = %v, want ErrConflict", d, err)
		}
	}
	if _, ok := r.Lookup("fresh"); ok {
		t.Fatal("a refused Declare registered a throttle")
	}
	same := base
	same.Limits = []Limit{{1, 100}} // limits may differ
	if _, err := r.Declare("q2", []Declaration{same}); err != nil {
		t.Fatalf("same key, other limits: %v", err)
	}
}

// The shared bucket of messages missing the key and a keyed bucket are separate.
func TestSharedAndKeyedBucketsAreSeparate(t *testing.T) {
	r := NewRegistry(0)
	merchant := keys.Key{{Kind: keys.Header, Name: "merchant"}}
	s, _ := r.Declare("q", []Declaration{{Name: "shared", Limits: []Limit{{1, 1000}}, Key: merchant}})
	shared := s.Throttles()[0]
	g, _ := merchant.Group(&keys.Subject{Headers: map[string]string{"merchant": "m1"}})
	b1 := BucketKey{Group: g}
	if ok, _ := r.Take(0, []Ref{{shared, b1}}); !ok {
		t.Fatal("first take refused")
	}
	if ok, _ := r.Take(0, []Ref{{shared, BucketKey{Missing: true}}}); !ok {
		t.Fatal("shared bucket refused after a keyed delivery")
	}
	if ok, at := r.Take(1, []Ref{{shared, b1}}); ok || at != 1000 {
		t.Fatalf("second take in the window = %v, retry at %d; want refused until 1000", ok, at)
	}
}

func TestTakeIsAllOrNothing(t *testing.T) {
	r := NewRegistry(0)
	s, _ := r.Declare("q", []Declaration{decl("global", Limit{2, 1000}), {Name: "merchant", Limits: []Limit{{1, 1000}},
		Key: keys.Key{{Kind: keys.Header, Name: "m"}}}})
	g, m := s.Throttles()[0], s.Throttles()[1]
	a, b := BucketKey{Group: "a"}, BucketKey{Group: "b"}
	steps := []struct {
		bucket BucketKey
		ok     bool
	}{{a, true}, {a, false}, {b, true}, {b, false}}
	for i, st := range steps {
		if ok, _ := r.Take(10, []Ref{{g, BucketKey{}}, {m, st.bucket}}); ok != st.ok {
			t.Fatalf("step %d: ok %v, want %v", i, ok, st.ok)
		}
	}
	st, _ := r.Bucket("global", BucketKey{}, 10)
	if !slices.Equal(st.Counted, []uint64{2}) || st.NextRoomAt != 1010 {
		t.Fatalf("global bucket %+v, want 2 counted, room at 1010 (refusals count nothing)", st)
	}
}

func TestIdleBucketsAreEvictedAndReportZeros(t *testing.T) {
	r := NewRegistry(0)
	s, _ := r.Declare("q", []Declaration{{Name: "m", Limits: []Limit{{1, 100}, {5, 1000}}, Key: keys.Key{{Kind: keys.FairnessKey}}}})
	th := s.Throttles()[0]
	for i := range 100 {
		r.Take(0, []Ref{{th, BucketKey{Group: string(rune('a' + i%26))}}})
	}
	if st, _ := r.Bucket("m", BucketKey{Group: "a"}, 999); !slices.Equal(st.Counted, []uint64{0, 1}) {
		t.Fatalf("before eviction: %+v", st)
	}
	r.Take(1000, []Ref{{th, BucketKey{Group: "z!"}}})
	if n := len(th.buckets); n != 1 {
		t.Fatalf("%d buckets after the largest window passed, want 1", n)
	}
	if st, _ := r.Bucket("m", BucketKey{Group: "a"}, 1000); !slices.Equal(st.Counted, []uint64{0, 0}) || st.NextRoomAt != 0 {
		t.Fatalf("evicted bucket reports %+v", st)
	}
	sum, _ := r.Stats("m", 1000)
	if sum.ActiveBuckets != 1 || sum.BucketsAtLimit != 1 {
		t.Fatalf("stats %+v, want 1 active bucket at limit", sum)
	}
}

// TestWindowNeverExceedsItsLimit is the exactness property: whatever the limits and the times of
// the attempts, no window of W ever holds more than N counted deliveries, checked against the
// list of every delivery time; and a refused attempt reports a retry time that is neither in the
// past nor earlier than the true next room.
func TestWindowNeverExceedsItsLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var lim Limit
		if rapid.Bool().Draw(t, "slotted") {
			lim = Limit{Max: rapid.Uint64Range(exactMax+1, 400).Draw(t, "max"), WindowMs: rapid.Uint64Range(1, 3000).Draw(t, "window")}
		} else {
			lim = Limit{Max: rapid.Uint64Range(1, exactMax).Draw(t, "max"), WindowMs: rapid.Uint64Range(1, 3000).Draw(t, "window")}
		}
		w := newWindow(lim)
		var times []int64
		now := rapid.Int64Range(0, 1<<40).Draw(t, "start")
		for range rapid.IntRange(1, 2000).Draw(t, "steps") {
			now += rapid.Int64Range(0, int64(lim.WindowMs)/8+2).Draw(t, "dt")
			inside := 0
			for _, x := range times {
				if x > now-int64(lim.WindowMs) {
					inside++
				}
			}
			if c := w.count(now); c < uint64(inside) {
				t.Fatalf("count %d below the %d deliveries inside the window", c, inside)
			}
			if !w.room(now) {
				at := w.nextRoom(now)
				if c := w.clone(); at <= now || !c.room(at) {
					t.Fatalf("no room at %d, but next room at %d (room there: %v)", now, at, c.room(at))
				}
				continue
			}
			if uint64(inside) >= lim.Max {
				t.Fatalf("room at %d with %d deliveries inside the window of %v", now, inside, lim)
			}
			w.add(now)
			times = append(times, now)
		}
	})
}

// A slotted window of 1 ms, the shortest (one-millisecond slots, two of them): fresh, it admits
// Max deliveries at one millisecond and no more, and has room again the next. (Once a rapid
// failure of TestWindowNeverExceedsItsLimit: max 65, window 1 ms, one step at 0.)
func TestSlottedWindowOfOneMillisecond(t *testing.T) {
	w := newWindow(Limit{Max: 65, WindowMs: 1})
	for i := range 65 {
		if !w.room(0) {
			t.Fatalf("no room at 0 after %d deliveries", i)
		}
		w.add(0)
	}
	if w.room(0) {
		t.Fatal("room at 0 after 65 deliveries")
	}
	if at := w.nextRoom(0); at != 1 || !w.room(1) || w.count(1) != 0 {
		t.Fatalf("next room at %d, room at 1: %v, count at 1: %d", at, w.room(1), w.count(1))
	}
}

// TestSaturatedWindowAchievesNinetyFivePercent offers a delivery every millisecond for many
// windows and counts what is admitted.
func TestSaturatedWindowAchievesNinetyFivePercent(t *testing.T) {
	for _, lim := range []Limit{{5, 1000}, {64, 100}, {65, 41}, {100, 1000}, {1000, 1000}, {10000, 60000}, {100, 65}} {
		w := newWindow(lim)
		windows := int64(20)
		end := windows * int64(lim.WindowMs)
		var n uint64
		for now := int64(0); now < end; now++ {
			for w.room(now) {
				w.add(now)
				n++
			}
		}
		ideal := float64(lim.Max) * float64(windows)
		if ratio := float64(n) / ideal; ratio < 0.95 || ratio > 1 {
			t.Errorf("%v: %d deliveries in %d windows, %.3f of N/W", lim, n, windows, ratio)
		}
	}
}

func (w *window) clone() *window {
	c := *w
	c.times = slices.Clone(w.times)
	c.slots = slices.Clone(w.slots)
	return &c
}

// A consumer that reconnects and declares its throttle again finds its buckets as it left
// them; another key under the same name starts afresh.
func TestRedeclaringAnEndedThrottleKeepsItsBuckets(t *testing.T) {
	r := NewRegistry(0)
	d := decl("api", Limit{2, 1000})
	s, _ := r.Declare("q", []Declaration{d})
	r.Take(0, []Ref{{s.Throttles()[0], BucketKey{}}})
	r.Take(10, []Ref{{s.Throttles()[0], BucketKey{}}})
	s.Close()
	if _, err := r.Stats("api", 20); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ended throttle: %v", err)
	}
	s, _ = r.Declare("q", []Declaration{d})
	if ok, at := r.Take(20, []Ref{{s.Throttles()[0], BucketKey{}}}); ok || at != 1000 {
		t.Fatalf("after redeclaring: take %v, retry %d; want refused until 1000", ok, at)
	}
	s.Close()
	other := d
	other.Key = keys.Key{{Kind: keys.FairnessKey}}
	s, _ = r.Declare("q", []Declaration{other})
	if ok, _ := r.Take(20, []Ref{{s.Throttles()[0], BucketKey{Group: "x"}}}); !ok {
		t.Fatal("a new key under the old name inherited its buckets")
	}
	s.Close()
	r.Take(5000, nil)
	s, _ = r.Declare("q", []Declaration{d})
	if len(r.dormant) != 0 {
		t.Fatalf("%d dormant throttles after their windows passed", len(r.dormant))
	}
}

// A limit declared later holds for windows that began before it: the bucket's past deliveries
// are counted conservatively (exactly enough from a window at least as long, else as full).
func TestALimitDeclaredLaterCountsThePast(t *testing.T) {
	r := NewRegistry(0)
	s1, _ := r.Declare("q", []Declaration{decl("api", Limit{10, 1000})})
	th := s1.Throttles()[0]
	for i := range 6 {
		if ok, _ := r.Take(int64(i), []Ref{{th, BucketKey{}}}); !ok {
			t.Fatal("refused under 10/s")
		}
	}
	// 8 per second: the 10/s window already holds 6 of them.
	s2, _ := r.Declare("q", []Declaration{decl("api", Limit{8, 1000})})
	for i := range 2 {
		if ok, _ := r.Take(10+int64(i), []Ref{{th, BucketKey{}}}); !ok {
			t.Fatalf("take %d refused with room for 2 under 8/s", i)
		}
	}
	if ok, _ := r.Take(20, []Ref{{th, BucketKey{}}}); ok {
		t.Fatal("a ninth delivery inside one second under 8/s")
	}
	s2.Close()
	// A longer window than any before knows nothing older: the bucket counts as full for it
	// until its window has passed since the last delivery.
	s3, _ := r.Declare("q", []Declaration{decl("api", Limit{30, 10_000})})
	if ok, at := r.Take(2000, []Ref{{th, BucketKey{}}}); ok || at < 10_000 {
		t.Fatalf("a new 30/10s limit admitted at 2000 (retry %d) without knowing the 10 s before", at)
	}
	s3.Close()
	s1.Close()
}

// A bucket evicted under short limits still counts for a longer limit declared afterwards: its
// deliveries are inside the new window, so no new bucket (it may be the evicted one) has room
// until they have left it. (FuzzRegistry found a bucket of 3 deliveries in 48 ms, evicted under
// 1 per 14 ms while another bucket delivered, then a 1 per 336 ms limit admitting a fourth.)
func TestAWindowDeclaredLaterCountsEvictedBuckets(t *testing.T) {
	r := NewRegistry(0)
	s1, _ := r.Declare("q", []Declaration{decl("api", Limit{1, 14})})
	th := s1.Throttles()[0]
	x, y := BucketKey{Group: "x"}, BucketKey{Group: "y"}
	for _, at := range []int64{0, 48, 96} {
		if ok, _ := r.Take(at, []Ref{{th, x}}); !ok {
			t.Fatalf("refused at %d under 1 per 14 ms", at)
		}
	}
	if ok, _ := r.Take(144, []Ref{{th, y}}); !ok { // evicts x: idle for longer than 14 ms
		t.Fatal("bucket y refused")
	}
	s2, _ := r.Declare("q", []Declaration{decl("api", Limit{1, 336})})
	for _, k := range []BucketKey{x, {Group: "never used"}} {
		if st, err := r.Bucket("api", k, 144); err != nil || st.NextRoomAt != 96+336 {
			t.Fatalf("bucket %v's stats at 144: %+v %v; want next room at %d, as Take answers", k, st, err, 96+336)
		}
	}
	if ok, at := r.Take(144, []Ref{{th, x}}); ok || at != 96+336 {
		t.Fatalf("bucket x took a delivery at 144 (retry %d) with 3 in the 336 ms before", at)
	}
	if ok, _ := r.Take(96+336, []Ref{{th, x}}); !ok {
		t.Fatal("bucket x refused once its deliveries left the window")
	}
	s2.Close()
	s1.Close()
}

// Queues share the registry but read their clocks apart. A Take whose now is behind a time the
// registry already counted at counts nothing and asks for a retry at that time, so that every
// delivery is counted at its own lease time: by the deliveries' times, a window never holds
// more than N. (Counting it at the later time instead let a 3-per-1-ms window show 5.)
func TestATakeBehindTheRegistrysTimeRetriesAtThatTime(t *testing.T) {
	r := NewRegistry(0)
	s, _ := r.Declare("q", []Declaration{decl("api", Limit{3, 1})})
	th := s.Throttles()[0]
	ref := []Ref{{th, BucketKey{}}}
	for range 3 {
		if ok, _ := r.Take(100, ref); !ok {
			t.Fatal("refused under 3 per ms")
		}
	}
	if ok, _ := r.Take(101, ref); !ok {
		t.Fatal("refused at 101 with the window of 100 passed")
	}
	if ok, at := r.Take(100, ref); ok || at != 101 {
		t.Fatalf("a take at 100 after one at 101: ok %v, retry at %d; want a refusal, retry at 101", ok, at)
	}
	for range 2 {
		if ok, _ := r.Take(101, ref); !ok {
			t.Fatal("the refused take counted: no room left at 101")
		}
	}
	if ok, _ := r.Take(101, ref); ok {
		t.Fatal("a fourth delivery in one millisecond under 3 per ms")
	}
	s.Close()
}
