package throttle

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/keys"
)

// savedScenario drives a registry through declarations (one subscription per throttle) and takes
// drawn by t, and returns it with its live subscriptions' declarations and the time reached.
func savedScenario(t *rapid.T) (r *Registry, subs []*Subscription, decls [][]Declaration, now int64) {
	r = NewRegistry(0)
	now = 1 << 30
	limit := rapid.Custom(func(t *rapid.T) Limit {
		return Limit{Max: rapid.SampledFrom([]uint64{1, 2, 5, 64, 65, 200}).Draw(t, "max"), WindowMs: rapid.Uint64Range(1, 5000).Draw(t, "window")}
	})
	for step := range rapid.IntRange(1, 120).Draw(t, "steps") {
		now += rapid.Int64Range(0, 300).Draw(t, "dt")
		if len(subs) == 0 || rapid.IntRange(0, 9).Draw(t, "op") == 0 {
			d := Declaration{Name: fmt.Sprint("t", rapid.IntRange(0, 2).Draw(t, "name")), Limits: []Limit{limit.Draw(t, "limit")}}
			if rapid.Bool().Draw(t, "keyed") {
				d.Key = perKey
			}
			if slices.ContainsFunc(decls, func(ds []Declaration) bool { return ds[0].Name == d.Name }) {
				continue // one subscription per throttle: declared again, it has all its limits at once
			}
			if s, err := r.Declare("q", []Declaration{d}); err == nil {
				subs, decls = append(subs, s), append(decls, []Declaration{d})
			}
			continue
		}
		s := subs[rapid.IntRange(0, len(subs)-1).Draw(t, "sub")]
		r.Take(now, []Ref{{T: s.Throttles()[0], B: BucketKey{Group: fmt.Sprint("k", rapid.IntRange(0, 5).Draw(t, "key"))}}})
		_ = step
	}
	return r, subs, decls, now
}

// A registry saved and loaded answers as the one saved would have gone on answering: after the
// restart the same subscriptions declare the same throttles again, and every take of the same
// buckets at the same times gets the same answer, so the counts of a clean restart are the
// counts before it. (Subscriptions that come back one by one with different limits of one
// throttle see what a reconnect sees: a limit missing for a while comes back conservatively.)
func TestALoadedRegistryCountsAsTheSavedOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, subs, decls, now := savedScenario(t)
		var buf bytes.Buffer
		if err := a.Save(&buf); err != nil {
			t.Fatal(err)
		}
		b := NewRegistry(0)
		if err := b.Load(bytes.NewReader(buf.Bytes()), now); err != nil {
			t.Fatal(err)
		}
		if b.held != heldNow(b) || b.held != a.held {
			t.Fatalf("loaded %d bytes (counted afresh %d), saved %d", b.held, heldNow(b), a.held)
		}
		// The saved registry goes on with its subscriptions; the loaded one gets them again.
		as, bs := subs, []*Subscription{}
		for _, ds := range decls {
			sb, err := b.Declare("q", ds)
			if err != nil {
				t.Fatalf("declaring %v again after the restart: %v", ds, err)
			}
			bs = append(bs, sb)
		}
		if len(as) == 0 {
			return
		}
		for i := range rapid.IntRange(0, 60).Draw(t, "takes") {
			now += rapid.Int64Range(0, 200).Draw(t, "later")
			j := rapid.IntRange(0, len(as)-1).Draw(t, "sub")
			k := BucketKey{Group: fmt.Sprint("k", rapid.IntRange(0, 6).Draw(t, "key"))}
			okA, atA := a.Take(now, []Ref{{T: as[j].Throttles()[0], B: k}})
			okB, atB := b.Take(now, []Ref{{T: bs[j].Throttles()[0], B: k}})
			if okA != okB || atA != atB {
				t.Fatalf("take %d of %v at %d: %v/%d without the restart, %v/%d after it", i, k, now, okA, atA, okB, atB)
			}
		}
	})
}

// A damaged save is refused or, when it still reads, loads a registry that works: nothing panics,
// hangs or miscounts its memory.
func TestADamagedSaveIsRefusedOrHarmless(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, _, _, now := savedScenario(t)
		var buf bytes.Buffer
		if err := a.Save(&buf); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		for range rapid.IntRange(1, 4).Draw(t, "flips") {
			i := rapid.IntRange(0, len(data)-1).Draw(t, "at")
			data[i] = rapid.Byte().Draw(t, "byte")
		}
		data = data[:rapid.IntRange(0, len(data)).Draw(t, "length")]
		b := NewRegistry(0)
		if err := b.Load(bytes.NewReader(data), now); err != nil {
			if !errors.Is(err, ErrSaved) {
				t.Fatalf("Load: %v, want ErrSaved", err)
			}
			return
		}
		if b.held != heldNow(b) {
			t.Fatalf("loaded %d bytes, the buckets hold %d", b.held, heldNow(b))
		}
		for _, name := range []string{"t0", "t1", "t2"} {
			for _, key := range []keys.Key{nil, perKey} {
				s, err := b.Declare("q", []Declaration{{Name: name, Key: key, Limits: []Limit{{3, 1000}}}})
				if err != nil {
					continue
				}
				for i := range 5 {
					b.Take(now+int64(i)*400, []Ref{{T: s.Throttles()[0], B: BucketKey{Group: "k1"}}})
				}
				s.Close()
			}
		}
	})
}

// A save from a time after now (the clock went back, or the file is damaged) is refused: its
// windows could not be trusted to end.
func TestASaveFromTheFutureIsRefused(t *testing.T) {
	a := NewRegistry(0)
	s, _ := a.Declare("q", []Declaration{{Name: "t", Limits: []Limit{{1, hourMs}}}})
	a.Take(5000, []Ref{{T: s.Throttles()[0]}})
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	if err := NewRegistry(0).Load(bytes.NewReader(buf.Bytes()), 4999); !errors.Is(err, ErrSaved) {
		t.Fatalf("loading a registry saved at 5000 at 4999: %v", err)
	}
	b := NewRegistry(0)
	if err := b.Load(bytes.NewReader(buf.Bytes()), 5000); err != nil {
		t.Fatal(err)
	}
	if err := b.Load(bytes.NewReader(buf.Bytes()), 5000); !errors.Is(err, ErrSaved) {
		t.Fatalf("loading into a registry that is not empty: %v", err)
	}
}

// A registry that started full after a crash and is saved before the largest window has passed
// since goes on starting new buckets full after it is loaded.
func TestARestartedRegistrySavedStaysRestarted(t *testing.T) {
	a := NewRegistry(0)
	a.Restarted(1000)
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	b := NewRegistry(0)
	if err := b.Load(bytes.NewReader(buf.Bytes()), 2000); err != nil {
		t.Fatal(err)
	}
	s, _ := b.Declare("q", []Declaration{{Name: "t", Limits: []Limit{{1, hourMs}}}})
	if ok, retryAt := b.Take(2000, []Ref{{T: s.Throttles()[0]}}); ok || retryAt != 1000+hourMs {
		t.Fatalf("a take after loading a registry restarted at 1000: ok %v, retry at %d", ok, retryAt)
	}
}
