package throttle

import (
	"fmt"
	"slices"
	"strings"

	"github.com/filamq/fila/server/keys"
)

// conflictError is ErrConflict with what was declared and what exists.
type conflictError struct {
	name       string
	key        keys.Key
	policy     Policy
	wantKey    keys.Key
	wantPolicy Policy
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("throttle %q is declared by live subscriptions with key [%s] and when_key_missing %s; "+
		"this declaration has key [%s] and when_key_missing %s", e.name, keyText(e.key), e.policy, keyText(e.wantKey), e.wantPolicy)
}

func (e *conflictError) Is(target error) bool { return target == ErrConflict }

func keyText(k keys.Key) string {
	s := ""
	for i, p := range k {
		if i > 0 {
			s += ","
		}
		s += p.String()
	}
	return s
}

// Summary describes a throttle (FIBP throttle_summary, and the counts of GetThrottleStats).
type Summary struct {
	Name           string
	Limits         []Limit // effective limits
	Key            keys.Key
	WhenKeyMissing Policy
	// Subscribers counts the live declaring subscriptions (of one queue, from QueueThrottles).
	Subscribers int
	// Queues where the throttle is active, sorted (Stats only).
	Queues []string
	// ActiveBuckets have deliveries inside their windows; BucketsAtLimit have no room now
	// (Stats only).
	ActiveBuckets, BucketsAtLimit uint64
}

func (t *Throttle) summary(subs int) Summary {
	return Summary{Name: t.name, Limits: slices.Clone(t.limits), Key: slices.Clone(t.key), WhenKeyMissing: t.policy, Subscribers: subs}
}

// live returns throttle name with its idle buckets evicted at now, and now clamped (r.clamp);
// ErrNotFound when no live subscription declares it. r.mu is held.
func (r *Registry) live(name string, now int64) (*Throttle, int64, error) {
	t := r.throttles[name]
	if t == nil {
		return nil, 0, fmt.Errorf("%w: no live subscription declares throttle %q", ErrNotFound, name)
	}
	now = r.clamp(now)
	t.evict(now)
	return t, now, nil
}

// Stats describes the throttle name at now, or fails with ErrNotFound when no live subscription
// declares it. It walks the throttle's buckets.
func (r *Registry) Stats(name string, now int64) (Summary, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, now, err := r.live(name, now)
	if err != nil {
		return Summary{}, err
	}
	s := t.summary(t.subs)
	for q := range t.queues {
		s.Queues = append(s.Queues, q)
	}
	slices.Sort(s.Queues)
	for _, b := range t.buckets {
		s.ActiveBuckets++ // evict left only buckets with a delivery inside the largest window
		if !b.room(now) {
			s.BucketsAtLimit++
		}
	}
	return s, nil
}

// QueueThrottles summarises the throttles declared by live subscriptions of queue, by name;
// Subscribers counts that queue's subscriptions only.
func (r *Registry) QueueThrottles(queue string) []Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Summary
	for _, t := range r.throttles {
		if n := t.queues[queue]; n > 0 {
			out = append(out, t.summary(n))
		}
	}
	slices.SortFunc(out, func(a, b Summary) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// BucketStats is the state of one bucket at a time (FIBP bucket_stats without waiting, which the
// queues know).
type BucketStats struct {
	Key BucketKey
	// Counted holds one count per effective limit, in Summary.Limits order: the deliveries the
	// limit is enforced against (conservatively, for a slotted window) inside its window.
	Counted []uint64
	// NextRoomAt is when one more delivery fits every limit; 0 when it fits now.
	NextRoomAt int64
}

// Bucket describes bucket key of throttle name at now. A bucket without deliveries inside its
// windows (evicted or never used) reports every count 0, and NextRoomAt when a new bucket has
// room (newRoom: 0 unless deliveries of buckets evict forgot are still inside a window), as Take
// would answer. It fails with ErrNotFound when no live subscription declares the throttle.
func (r *Registry) Bucket(name string, key BucketKey, now int64) (BucketStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, now, err := r.live(name, now)
	if err != nil {
		return BucketStats{}, err
	}
	st := BucketStats{Key: key, Counted: make([]uint64, len(t.limits))}
	b := t.buckets[key]
	if b == nil {
		if at := t.newRoom(); at > now {
			st.NextRoomAt = at
		}
		return st, nil
	}
	for i := range b.windows {
		st.Counted[i] = b.windows[i].reported(now)
	}
	if !b.room(now) {
		st.NextRoomAt = b.nextRoom(now)
	}
	return st, nil
}

// Lookup returns the live throttle name.
func (r *Registry) Lookup(name string) (*Throttle, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.throttles[name]
	return t, ok
}

// Limits are t's effective limits now (nil once it is gone): a cluster throttle's borrower sends
// them to the owner, which enforces every node's.
func (r *Registry) Limits(t *Throttle) []Limit {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.throttles[t.name] != t {
		return nil
	}
	return slices.Clone(t.limits)
}
