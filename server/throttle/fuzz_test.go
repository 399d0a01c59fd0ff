package throttle

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// FuzzRegistry drives a registry with a program read from the input: subscriptions declaring
// throttles (names, limits and policies from the input, valid or not), subscriptions ending, clean
// restarts (Save, Load into a new registry, every subscription declared again), and
// Takes of one or two buckets at times moving forward by up to 255 ms (or behind). Declarations
// fail only with ErrInvalid, ErrConflict or ErrFull; nothing panics; a Take behind the registry's time
// counts nothing; a Take that counts leaves no bucket with more deliveries than Max in any window
// of WindowMs of any limit declared at the time (the package's exactness promise, across ends
// and declarations again: only buckets a gone throttle may have forgotten start afresh), and one
// that does not gives a retry time after now.
func FuzzRegistry(f *testing.F) {
	f.Add([]byte{0, 0, 1, 3, 10, 2, 5, 2, 5, 2, 5, 2, 5, 2, 200, 2, 5})
	f.Add([]byte{0, 1, 2, 1, 4, 2, 90, 0, 1, 1, 2, 9, 2, 1, 2, 1, 1, 0, 2, 1, 2, 3, 2, 3})
	f.Add([]byte{0, 0, 3, 1, 1, 1, 1, 2, 50, 2, 0, 2, 0, 3, 9, 2, 0, 1, 0, 0, 0, 1, 5, 2, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 5, 1, 5, 2, 7})
	f.Add([]byte{0, 0, 0, 1, 1, 200, 2, 5, 0, 0, 1, 255, 2, 5, 0, 0, 2, 5, 0, 0}) // a clean restart between takes
	f.Fuzz(func(t *testing.T, prog []byte) {
		r := NewRegistry(0)
		var subs []*Subscription
		type taken struct {
			at     int64
			bucket string
		}
		var takes []taken
		// A throttle no live subscription declares is gone; its buckets stay dormant only until
		// idle for its largest window, and only a declaration with the same policy finds them
		// again (Registry's doc). gone holds what the model needs to know then.
		gone := map[string]goneThrottle{}
		forget := func(name string, now int64, idle int64) { // drops the takes of buckets evicted by now
			last := map[string]int64{}
			for _, x := range takes {
				last[x.bucket] = max(last[x.bucket], x.at)
			}
			kept := takes[:0]
			for _, x := range takes {
				if !strings.HasPrefix(x.bucket, name+"/") || now-last[x.bucket] < idle {
					kept = append(kept, x)
				}
			}
			takes = kept
		}
		now := int64(1 << 30)
		next := func() byte {
			if len(prog) == 0 {
				return 0
			}
			b := prog[0]
			prog = prog[1:]
			return b
		}
		for steps := 0; len(prog) > 0 && steps < 400; steps++ {
			switch next() % 4 {
			case 0: // declare: name, policy, limits (max, window)
				d := Declaration{Name: string(rune('a' + next()%3)), WhenKeyMissing: Policy(next() % 3)}
				for range next() % 5 {
					d.Limits = append(d.Limits, Limit{Max: uint64(next() % 8), WindowMs: uint64(next()) * 7})
				}
				s, err := r.Declare("q", []Declaration{d})
				if err != nil {
					if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrFull) {
						t.Fatalf("Declare(%v) failed with %v", d, err)
					}
					continue
				}
				if g, ok := gone[d.Name]; ok {
					idle := g.maxWindow
					if g.policy != d.WhenKeyMissing {
						idle = 0 // another throttle under the same name: its buckets are new
					}
					forget(d.Name, max(now, r.last), idle)
					delete(gone, d.Name)
				}
				subs = append(subs, s)
			case 1: // end a subscription, or (255) restart cleanly
				if len(subs) > 0 {
					sel := next()
					if sel == 255 {
						r, subs = restartCleanly(t, r, subs, max(now, r.last), func(name string, g goneThrottle) { gone[name] = g },
							func(name string, at int64) {
								if g, ok := gone[name]; ok {
									forget(name, at, g.maxWindow)
									delete(gone, name)
								}
							})
						continue
					}
					i := int(sel) % len(subs)
					closing := subs[i]
					closing.Close()
					subs = append(subs[:i], subs[i+1:]...)
					for _, d := range closing.decls {
						if !slices.ContainsFunc(subs, func(o *Subscription) bool { return o.decls[0].Name == d.Name }) {
							g := goneThrottle{policy: d.WhenKeyMissing}
							for _, l := range d.Limits {
								g.maxWindow = max(g.maxWindow, l.span())
							}
							gone[d.Name] = g
						}
					}
				}
			case 2, 3: // take the first or every throttle of a subscription, in bucket g
				if len(subs) == 0 {
					continue
				}
				dt := int64(next())
				if dt == 255 {
					dt = -int64(next()) // behind the registry's time
				}
				now += dt
				s := subs[int(next())%len(subs)]
				g := string(rune('x' + next()%2))
				var refs []Ref
				for _, th := range s.Throttles() {
					refs = append(refs, Ref{T: th, B: BucketKey{Group: g}})
				}
				before := r.last
				ok, retryAt := r.Take(now, refs)
				switch {
				case ok && now < before:
					t.Fatalf("a Take at %d, behind the registry's %d, counted", now, before)
				case !ok && retryAt <= now:
					t.Fatalf("a refused Take at %d says retry at %d", now, retryAt)
				case !ok:
					continue
				}
				for _, ref := range refs {
					takes = append(takes, taken{now, ref.T.Name() + "/" + g})
				}
				if err := checkWindows(subs, refs, g, now, func(bucket string, from int64) (n uint64) {
					for _, x := range takes {
						if x.bucket == bucket && x.at > from && x.at <= now {
							n++
						}
					}
					return n
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, s := range subs {
			s.Close()
		}
	})
}

// goneThrottle is what the fuzz model knows of a throttle no live subscription declares.
type goneThrottle struct {
	policy    Policy
	maxWindow int64
}

// restartCleanly saves r at now and loads it into a new registry, as a clean stop and start do,
// and declares every subscription's throttles again there, in order (consumers reconnecting).
// Every throttle is gone between the two (markGone, with its largest window across the live
// subscriptions: the saved limits); a declaration that finds it again calls found, as a
// declaration after an end does in the model. It returns the new registry and the subscriptions
// declared again.
func restartCleanly(t *testing.T, r *Registry, subs []*Subscription, now int64, markGone func(string, goneThrottle), found func(string, int64)) (*Registry, []*Subscription) {
	var buf bytes.Buffer
	if err := r.Save(&buf); err != nil {
		t.Fatalf("Save: %v", err)
	}
	r2 := NewRegistry(r.maxMemory)
	if err := r2.Load(&buf, now); err != nil {
		t.Fatalf("Load: %v", err)
	}
	windows := map[string]goneThrottle{}
	for _, s := range subs {
		for _, d := range s.decls {
			g := windows[d.Name]
			g.policy = d.WhenKeyMissing
			for _, l := range d.Limits {
				g.maxWindow = max(g.maxWindow, l.span())
			}
			windows[d.Name] = g
		}
	}
	for name, g := range windows {
		markGone(name, g)
	}
	var again []*Subscription
	for _, s := range subs {
		s2, err := r2.Declare("q", s.decls)
		if err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatalf("declaring %v again after a restart: %v", s.decls, err)
			}
			continue
		}
		for _, d := range s.decls {
			found(d.Name, max(now, r2.last))
		}
		again = append(again, s2)
	}
	return r2, again
}

// checkWindows checks, for the throttles that just counted a delivery (taken) in bucket g,
// every limit the live subscriptions declare on them, over the window ending at now:
// count(bucket, now-window) deliveries are inside it. (A throttle that counted nothing is not
// checked: a limit declared later does not make earlier deliveries wrong, it keeps the next ones
// out of its windows.)
func checkWindows(subs []*Subscription, taken []Ref, g string, now int64, count func(bucket string, from int64) uint64) error {
	for _, ref := range taken {
		name := ref.T.Name()
		for _, s := range subs {
			for _, d := range s.decls {
				if d.Name != name {
					continue
				}
				for _, l := range d.Limits {
					if n := count(name+"/"+g, now-l.span()); n > l.Max {
						return fmt.Errorf("throttle %q bucket %q: %d deliveries in the %d ms up to %d, limit %v", name, g, n, l.WindowMs, now, l)
					}
				}
			}
		}
	}
	return nil
}
