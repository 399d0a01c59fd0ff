package throttle

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/filamq/fila/server/keys"
)

// Saving the buckets across a clean restart. A server that stops cleanly writes its registry
// (Save) once no delivery can be counted any more; the next process reads it (Load) before its
// first declaration and finds every throttle dormant, its buckets as they were, so a consumer that
// declares the throttle again after the restart finds its counts as it left them (the same rule as
// for a reconnect). A crash leaves nothing to load: then Restarted.

// savedVersion is the format of Save; Load refuses any other.
const savedVersion = 1

type savedRegistry struct {
	Version     int
	Last        int64
	Restarted   bool
	RestartedAt int64
	Throttles   []savedThrottle
}

type savedThrottle struct {
	Name        string
	Key         keys.Key
	Policy      Policy
	Limits      []Limit
	Holder      string
	Evicted     bool
	EvictedLast int64
	Buckets     []savedBucket // oldest first
}

type savedBucket struct {
	Missing bool
	Group   string
	LastAt  int64
	Windows []savedWindow // one per limit, in Limits order
}

type savedWindow struct {
	Times      []int64 // exact: the last deliveries, oldest first
	Width      int64   // slotted
	Slots      []uint64
	Cur        int64
	BlindUntil int64
}

// Save writes every throttle of the registry, live or dormant, with its buckets. Call it once no
// delivery can be counted any more (the queues have stopped).
func (r *Registry) Save(w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := savedRegistry{Version: savedVersion, Last: r.last, Restarted: r.restarted, RestartedAt: r.restartedAt}
	for _, m := range []map[string]*Throttle{r.throttles, r.dormant} {
		for _, t := range m {
			s.Throttles = append(s.Throttles, t.saved())
		}
	}
	slices.SortFunc(s.Throttles, func(a, b savedThrottle) int { return cmpString(a.Name, b.Name) })
	return gob.NewEncoder(w).Encode(&s)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (t *Throttle) saved() savedThrottle {
	st := savedThrottle{Name: t.name, Key: t.key, Policy: t.policy, Limits: t.limits, Holder: t.holder,
		Evicted: t.evicted, EvictedLast: t.evictedLast}
	for b := t.oldest; b != nil; b = b.next {
		sb := savedBucket{Missing: b.key.Missing, Group: b.key.Group, LastAt: b.lastAt}
		for i := range b.windows {
			w := &b.windows[i]
			sw := savedWindow{Width: w.width, Slots: w.slots, Cur: w.cur, BlindUntil: w.blindUntil}
			if w.exact() {
				sw.Times = append(slices.Clone(w.times[w.next:]), w.times[:w.next]...)
			}
			sb.Windows = append(sb.Windows, sw)
		}
		st.Buckets = append(st.Buckets, sb)
	}
	return st
}

// ErrSaved is Load's error for a saved registry it cannot read.
var ErrSaved = errors.New("throttle: unreadable saved registry")

// Load reads what Save wrote into an empty registry at now: every throttle becomes dormant with
// its buckets. It checks every part, so that a damaged file is refused (ErrSaved, nothing loaded)
// rather than trusted, and refuses a registry saved at a time after now (the clock went back, or
// the file is damaged: its windows could not be trusted to end). Call it before the first
// declaration.
func (r *Registry) Load(rd io.Reader, now int64) error {
	var s savedRegistry
	if err := gob.NewDecoder(rd).Decode(&s); err != nil {
		return fmt.Errorf("%w: %v", ErrSaved, err)
	}
	switch {
	case s.Version != savedVersion:
		return fmt.Errorf("%w: version %d, this server reads %d", ErrSaved, s.Version, savedVersion)
	case s.Last > now || s.Restarted && s.RestartedAt > now:
		return fmt.Errorf("%w: saved at %d, after now (%d)", ErrSaved, max(s.Last, s.RestartedAt), now)
	}
	loaded := map[string]*Throttle{}
	for _, st := range s.Throttles {
		if loaded[st.Name] != nil {
			return fmt.Errorf("%w: throttle %q twice", ErrSaved, st.Name)
		}
		t, err := r.restore(st, s.Last)
		if err != nil {
			return fmt.Errorf("%w: throttle %q: %v", ErrSaved, st.Name, err)
		}
		loaded[st.Name] = t
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.throttles) > 0 || len(r.dormant) > 0 {
		return fmt.Errorf("%w: the registry is not empty", ErrSaved)
	}
	r.last = max(r.last, s.Last)
	if s.Restarted {
		r.restarted, r.restartedAt = true, max(r.restartedAt, s.RestartedAt)
	}
	for name, t := range loaded {
		r.dormant[name] = t
		r.held += t.held
	}
	return nil
}

// restore rebuilds a dormant throttle from st, checking it as Declare and Take would have made
// it; last is the latest time the saving registry counted at.
func (r *Registry) restore(st savedThrottle, last int64) (*Throttle, error) {
	d := Declaration{Name: st.Name, Key: st.Key, Limits: st.Limits, WhenKeyMissing: st.Policy}
	if err := Validate([]Declaration{d}); err != nil {
		return nil, err
	}
	if !slices.Equal(effective(st.Limits), st.Limits) {
		return nil, errors.New("limits not in effective order")
	}
	t := &Throttle{reg: r, name: st.Name, key: st.Key, policy: st.Policy, limits: st.Limits, holder: st.Holder,
		declared: map[Limit]int{}, queues: map[string]int{}, buckets: map[BucketKey]*bucket{},
		evicted: st.Evicted, evictedLast: st.EvictedLast}
	for _, l := range st.Limits {
		t.maxWindow = max(t.maxWindow, l.span())
	}
	if st.EvictedLast > last {
		return nil, errors.New("evicted after the registry's time")
	}
	prev := int64(-1 << 63)
	for _, sb := range st.Buckets {
		k := BucketKey{Missing: sb.Missing, Group: sb.Group}
		if t.buckets[k] != nil || sb.Missing && sb.Group != "" || sb.LastAt < prev || sb.LastAt > last {
			return nil, fmt.Errorf("bucket %q out of order, repeated or malformed", sb.Group)
		}
		prev = sb.LastAt
		b, err := t.restoreBucket(k, sb, last)
		if err != nil {
			return nil, err
		}
		t.buckets[k] = b
		t.pushNewest(b)
		b.mem = b.memory()
		t.held += b.mem
	}
	return t, nil
}

// restoreBucket rebuilds bucket k from sb, its windows checked against the shapes newWindow
// makes; last is the latest time the saving registry counted at.
func (t *Throttle) restoreBucket(k BucketKey, sb savedBucket, last int64) (*bucket, error) {
	if len(sb.Windows) != len(t.limits) {
		return nil, fmt.Errorf("bucket %q has %d windows for %d limits", k.Group, len(sb.Windows), len(t.limits))
	}
	b := t.newBucket(k)
	b.lastAt = sb.LastAt
	for i, sw := range sb.Windows {
		w := &b.windows[i]
		if sw.BlindUntil > last+w.lim.span() {
			return nil, fmt.Errorf("bucket %q: blind past its window", k.Group)
		}
		w.blindUntil = sw.BlindUntil
		if w.exact() {
			if uint64(len(sw.Times)) > w.lim.Max || len(sw.Slots) > 0 || !slices.IsSorted(sw.Times) ||
				len(sw.Times) > 0 && sw.Times[len(sw.Times)-1] > last { // a seed counts at its time, not lastAt
				return nil, fmt.Errorf("bucket %q: a malformed window for %v", k.Group, w.lim)
			}
			w.times = append(w.times, sw.Times...) // oldest first: the ring starts at 0
			continue
		}
		latest := w.slotOf(last)
		if sw.Width != w.width || len(sw.Slots) != len(w.slots) || len(sw.Times) > 0 || sw.Cur > latest {
			return nil, fmt.Errorf("bucket %q: a malformed window for %v", k.Group, w.lim)
		}
		if sw.Cur < latest-int64(len(w.slots)) {
			// Every slot is older than any window the registry will read (never before last):
			// advance would clear them all. Start cleared, so that no advance spans a huge gap.
			w.cur = latest - int64(len(w.slots))
			continue
		}
		copy(w.slots, sw.Slots)
		w.cur = sw.Cur
		for _, n := range w.slots {
			if w.total+n < w.total {
				return nil, fmt.Errorf("bucket %q: slot counts overflow", k.Group)
			}
			w.total += n
		}
	}
	return b, nil
}
