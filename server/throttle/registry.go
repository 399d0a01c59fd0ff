package throttle

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/filamq/fila/server/keys"
)

// Registry holds every throttle of the broker — those declared by at least one live
// subscription, on any queue — and their buckets. It is safe for concurrent use: the queue
// actors share one Registry, and one mutex guards it (a Take is a few map look-ups and counter
// updates, so the lock is held for well under a microsecond).
//
// Times are Unix milliseconds passed by the caller (no clock is read here). Callers on different
// goroutines may pass times slightly out of order; the Registry uses the latest time it has seen
// when it is given an earlier one, so windows only move forward.
//
// A throttle whose last subscription ended is gone (ErrNotFound, and any key may be declared
// under its name again), but its buckets are kept, dormant, until they are idle for longer than
// their largest window: a consumer that reconnects and declares the same throttle again (same
// key and policy) finds its buckets as it left them, so reconnecting never resets a limit.
//
// The buckets' state is bounded (MaxMemory): a consumer that declares a keyed throttle with a
// long window and is delivered messages with ever new key values would otherwise make it grow
// without end. The bound is shared fairly (share.go): each live throttle may always hold its
// share — the bound split evenly between the holders (API keys) of live throttles, and a
// holder's part evenly between its throttles — and may hold more only while the bound has room.
// When a new bucket does not fit, dormant buckets are forgotten first (oldest first within each
// dormant throttle, the throttles in no set order); then, if the throttles that need the new
// buckets stay within their shares, the oldest buckets of the live throttles furthest over their
// shares (reclaim, which keeps their limits exact); if it still does not fit, the delivery waits
// (no room, retry after bucketRetryMs), so that no limit is ever exceeded.
// (A throttle declared again after its dormant buckets were forgotten so starts them afresh.) A
// declaration that would grow the buckets past the bound is refused (ErrFull; it never makes
// room by forgetting the buckets of a throttle it declares again); ending a subscription never
// is, so when it makes a limit it hid effective (a looser one with more room per window) the
// buckets may grow past the bound, and then no new bucket is made until they are back under it.
type Registry struct {
	mu        sync.Mutex
	throttles map[string]*Throttle
	dormant   map[string]*Throttle // ended throttles whose buckets still count deliveries
	holders   map[string]int64     // live throttles of each holder (share.go)
	last      int64
	held      int64 // bytes of every bucket's state
	maxMemory int64

	restarted   bool // deliveries before restartedAt may be unknown (Restarted)
	restartedAt int64
}

// DefaultMaxMemory bounds the state of every bucket of a registry.
const DefaultMaxMemory = 64 << 20

// bucketRetryMs is when a delivery refused for want of bucket memory is offered again.
const bucketRetryMs = 1000

// NewRegistry returns an empty registry whose buckets hold at most maxMemory bytes
// (DefaultMaxMemory when 0).
func NewRegistry(maxMemory int64) *Registry {
	if maxMemory <= 0 {
		maxMemory = DefaultMaxMemory
	}
	return &Registry{throttles: map[string]*Throttle{}, dormant: map[string]*Throttle{}, holders: map[string]int64{}, maxMemory: maxMemory}
}

// Throttle is one named throttle. Its name, key and policy are fixed while it exists; its
// effective limits follow the live declarations.
type Throttle struct {
	reg    *Registry
	name   string
	key    keys.Key
	policy Policy

	declared  map[Limit]int // live declarations of each limit
	limits    []Limit       // effective limits, compareLimits order
	maxWindow int64
	subs      int
	queues    map[string]int // live declaring subscriptions per queue

	buckets        map[BucketKey]*bucket
	oldest, newest *bucket // buckets by last delivery, oldest first
	held           int64   // bytes of its buckets, counted in Registry.held
	holder         string  // who declared it (DeclareAs), for its fair share of the bound

	// evictedLast is the last delivery of the buckets evict forgot (when evicted is set): a
	// limit declared afterwards with a longer window than they were idle for may still hold it,
	// so no new bucket is made until it has left every window (newRoom).
	evictedLast int64
	evicted     bool
}

// Name, Key and Policy describe the throttle; Key must not be modified.
func (t *Throttle) Name() string   { return t.name }
func (t *Throttle) Key() keys.Key  { return t.key }
func (t *Throttle) Policy() Policy { return t.policy }

// BucketKey names one bucket of a throttle: the shared bucket of messages missing the key
// (Missing), or the bucket of one key value (Group is keys.Key.Group's encoding of the values;
// "" for the one bucket of an unkeyed throttle).
type BucketKey struct {
	Missing bool
	Group   string
}

// bucket is the state of one bucket: one window per effective limit.
type bucket struct {
	key        BucketKey
	windows    []window
	mem        int64 // bytes held, counted in Registry.held
	lastAt     int64 // last delivery counted
	prev, next *bucket
}

func (b *bucket) room(now int64) bool {
	for i := range b.windows {
		if !b.windows[i].room(now) {
			return false
		}
	}
	return true
}

// nextRoom is when one more delivery fits every window.
func (b *bucket) nextRoom(now int64) int64 {
	at := now
	for i := range b.windows {
		at = max(at, b.windows[i].nextRoom(now))
	}
	return at
}

// Subscription is the declarations of one live subscription. Close it when the subscription
// ends.
type Subscription struct {
	reg       *Registry
	queue     string
	decls     []Declaration
	throttles []*Throttle
	closed    bool
}

// Throttles are the subscription's throttles, in declaration order.
func (s *Subscription) Throttles() []*Throttle { return s.throttles }

// Declare is DeclareAs for the anonymous holder "".
func (r *Registry) Declare(queue string, ds []Declaration) (*Subscription, error) {
	return r.DeclareAs("", queue, ds)
}

// DeclareAs registers the declarations of a subscription of queue made by holder (the API key
// ID; "" without authentication). A throttle it creates (or revives) is holder's for its share of
// the bound. It fails with ErrInvalid (see Validate), ErrConflict when a throttle of that name
// exists with another key or policy, or ErrFull, registering nothing.
func (r *Registry) DeclareAs(holder, queue string, ds []Declaration) (*Subscription, error) {
	if err := Validate(ds); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range ds {
		t := r.throttles[d.Name]
		if t != nil && (!slices.Equal(t.key, d.Key) || t.policy != d.WhenKeyMissing) {
			return nil, conflict(t, d)
		}
		if t != nil {
			added := 0 // a declaration's limits are distinct (Validate)
			for _, l := range d.Limits {
				if t.declared[l] == 0 {
					added++
				}
			}
			if len(t.declared)+added > MaxDeclaredLimits {
				return nil, invalid("throttle %q would have more than %d distinct limits across its subscriptions", d.Name, MaxDeclaredLimits)
			}
		}
	}
	r.sweepDormant()
	reviving := map[string]bool{} // dormant throttles ds declares again: their buckets are kept
	for _, d := range ds {
		reviving[d.Name] = true
	}
	if need, want := r.growth(ds); !r.fits(need, r.last, reviving) && !r.reclaim(need, want) {
		return nil, full("the throttles' buckets cannot take these limits within the server's bound of %d bytes; back off and retry", r.maxMemory)
	}
	s := &Subscription{reg: r, queue: queue, decls: slices.Clone(ds)}
	for _, d := range ds {
		t := r.throttles[d.Name]
		if t == nil {
			t = r.dormant[d.Name]
			delete(r.dormant, d.Name)
			if t != nil && (!slices.Equal(t.key, d.Key) || t.policy != d.WhenKeyMissing) {
				t.forget() // another throttle takes the name: its buckets do not apply
				t = nil
			}
			if t == nil {
				t = &Throttle{reg: r, name: d.Name, key: slices.Clone(d.Key), policy: d.WhenKeyMissing,
					declared: map[Limit]int{}, queues: map[string]int{}, buckets: map[BucketKey]*bucket{}}
			}
			t.holder = holder
			r.throttles[d.Name] = t
			r.holders[holder]++
		}
		t.subs++
		t.queues[queue]++
		for _, l := range d.Limits {
			t.declared[l]++
		}
		t.refresh(r.last)
		s.throttles = append(s.throttles, t)
	}
	return s, nil
}

func conflict(t *Throttle, d Declaration) error {
	return &conflictError{name: t.name, key: t.key, policy: t.policy, wantKey: d.Key, wantPolicy: d.WhenKeyMissing}
}

// Close ends the subscription's declarations: limits no other subscription declares stop
// applying, and a throttle no live subscription declares any more is gone with its buckets. It
// returns the queues where the subscription's throttles are still active (their limits may
// have loosened). Closing twice does nothing.
func (s *Subscription) Close() (affected []string) {
	r := s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	seen := map[string]bool{}
	for i, t := range s.throttles {
		t.subs--
		if t.queues[s.queue]--; t.queues[s.queue] == 0 {
			delete(t.queues, s.queue)
		}
		for _, l := range s.decls[i].Limits {
			if t.declared[l]--; t.declared[l] == 0 {
				delete(t.declared, l)
			}
		}
		if t.subs == 0 {
			delete(r.throttles, t.name)
			if r.holders[t.holder]--; r.holders[t.holder] == 0 {
				delete(r.holders, t.holder)
			}
			if t.evict(r.last); len(t.buckets) > 0 {
				r.dormant[t.name] = t
			}
			continue
		}
		t.refresh(r.last)
		for q := range t.queues {
			if !seen[q] {
				seen[q] = true
				affected = append(affected, q)
			}
		}
	}
	slices.Sort(affected)
	return affected
}

// refresh recomputes the effective limits after the declarations changed, keeping the windows
// of limits that stay. A limit new to a bucket starts from a conservative count of what the
// bucket delivered inside its window (see seedCount), so that it holds for every window that ends
// while it is effective, including windows that began before it was declared.
func (t *Throttle) refresh(now int64) {
	limits := effective(slices.Collect(maps.Keys(t.declared)))
	if slices.Equal(limits, t.limits) {
		return
	}
	t.limits = limits
	t.maxWindow = 0
	for _, l := range limits {
		t.maxWindow = max(t.maxWindow, l.span())
	}
	for _, b := range t.buckets {
		old := b.windows
		b.windows = make([]window, len(limits))
		for i, l := range limits {
			j := slices.IndexFunc(old, func(w window) bool { return w.lim == l })
			if j >= 0 {
				b.windows[i] = old[j]
			} else {
				b.windows[i] = newWindow(l)
				n, known := seedCount(b, old, l, now)
				b.windows[i].seed(now, n, known)
			}
		}
		t.recount(b)
	}
}

// seedCount bounds what bucket b delivered in the window of l ending at now, from its windows old
// (the limits it had): a window at least as long counts at least as much. Without one, nothing is
// known (known false) unless the bucket has been idle for longer than l's window.
func seedCount(b *bucket, old []window, l Limit, now int64) (n uint64, known bool) {
	if b.lastAt+l.span() <= now {
		return 0, true
	}
	for i := range old {
		if old[i].lim.WindowMs < l.WindowMs {
			continue
		}
		if c, ok := old[i].bound(now); ok && (!known || c < n) {
			n, known = c, true
		}
	}
	return n, known
}

// Ref is one bucket of one throttle.
type Ref struct {
	T *Throttle
	B BucketKey
}

// Take counts one delivery in every bucket of refs if each has room at now under every effective
// limit of its throttle, and reports whether it did. When one has no room, nothing is counted and
// retryAt is the earliest time at which all could have room (if nothing else is counted before).
// The throttles must be live (declared by a subscription not yet closed).
//
// Queues share the registry and read their clocks apart, so a caller's now may be behind a time
// the registry has already counted at. Such a Take counts nothing and answers retryAt = that
// time: a delivery is counted at the time its lease starts, never moved to a later one, so the
// windows a consumer sees by the deliveries' lease times are the windows counted here.
func (r *Registry) Take(now int64, refs []Ref) (ok bool, retryAt int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now < r.last {
		return false, r.last
	}
	r.last = now
	retryAt = now
	ok = true
	var need int64 // memory of the buckets this delivery creates
	for _, ref := range refs {
		b := ref.T.buckets[ref.B]
		if b == nil {
			ref.T.evict(now)
			need += ref.T.newBucketMemory(ref.B)
			if at := ref.T.newRoom(); at > now {
				ok = false
				retryAt = max(retryAt, at)
			}
		} else if !b.room(now) {
			ok = false
			retryAt = max(retryAt, b.nextRoom(now))
		}
	}
	if !ok {
		return false, retryAt
	}
	if !r.fits(need, now, nil) && !r.reclaimFor(need, refs) {
		return false, now + bucketRetryMs
	}
	for _, ref := range refs {
		t := ref.T
		t.evict(now)
		b := t.buckets[ref.B]
		if b == nil {
			k := ref.B
			k.Group = strings.Clone(k.Group) // not the caller's string, which may hold more
			b = t.newBucket(k)
			t.buckets[k] = b
			t.recount(b)
		} else {
			t.unlink(b)
		}
		for i := range b.windows {
			b.windows[i].add(now)
		}
		b.lastAt = now
		t.pushNewest(b)
	}
	return true, 0
}

// sweepDormant forgets the dormant throttles whose buckets have all gone idle.
func (r *Registry) sweepDormant() {
	for name, t := range r.dormant {
		if t.evict(r.last); len(t.buckets) == 0 {
			delete(r.dormant, name)
		}
	}
}

// evict forgets the buckets that counted nothing for longer than the largest window: every
// count of theirs is 0, as is that of a bucket never seen.
func (t *Throttle) evict(now int64) {
	for b := t.oldest; b != nil && b.lastAt+t.maxWindow <= now; b = t.oldest {
		t.evictedLast, t.evicted = max(t.evictedLast, b.lastAt), true
		t.drop(b)
	}
}

// newRoom is when a new bucket has room: the bucket may be one evict forgot, whose deliveries
// count in every window they are still inside (the current limits may be longer than those it
// was evicted under: TestAWindowDeclaredLaterCountsEvictedBuckets), or one whose deliveries
// before a restart this registry never saw (Restarted).
func (t *Throttle) newRoom() int64 {
	var at int64
	if t.evicted {
		at = t.evictedLast + t.maxWindow
	}
	if r := t.reg; r.restarted {
		at = max(at, r.restartedAt+t.maxWindow)
	}
	return at
}

// Restarted tells the registry that deliveries it does not know of may have been counted before
// at (Unix ms): a previous process's, ended by a crash or a restart, whose buckets are lost. Every
// bucket of every throttle then starts full until at plus the throttle's largest window, so that
// no window holds more than N across the restart (windows that end later hold only deliveries
// counted here). Call it before the first declaration.
func (r *Registry) Restarted(at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarted, r.restartedAt = true, at
}

func (t *Throttle) drop(b *bucket) {
	t.unlink(b)
	delete(t.buckets, b.key)
	t.reg.held -= b.mem
	t.held -= b.mem
}

// forget drops every bucket of a throttle that is gone.
func (t *Throttle) forget() {
	for t.oldest != nil {
		t.drop(t.oldest)
	}
}

// newBucket makes an empty bucket of t for k.
func (t *Throttle) newBucket(k BucketKey) *bucket {
	b := &bucket{key: k, windows: make([]window, len(t.limits))}
	for i, l := range t.limits {
		b.windows[i] = newWindow(l)
	}
	return b
}

// fits reports whether need more bytes of bucket state fit the bound, forgetting dormant
// buckets to make room: oldest first within each dormant throttle, the throttles in no set
// order, and never those of the dormant throttles in keep (a declaration reviving them: were
// their buckets forgotten, its limits would start afresh).
func (r *Registry) fits(need int64, now int64, keep map[string]bool) bool {
	if r.held+need <= r.maxMemory {
		return true
	}
	for name, t := range r.dormant {
		if keep[name] {
			continue
		}
		t.evict(now)
		for t.oldest != nil && r.held+need > r.maxMemory {
			t.drop(t.oldest)
		}
		if len(t.buckets) == 0 {
			delete(r.dormant, name)
		}
		if r.held+need <= r.maxMemory {
			return true
		}
	}
	return false
}

func (t *Throttle) unlink(b *bucket) {
	if b.prev == nil {
		t.oldest = b.next
	} else {
		b.prev.next = b.next
	}
	if b.next == nil {
		t.newest = b.prev
	} else {
		b.next.prev = b.prev
	}
	b.prev, b.next = nil, nil
}

func (t *Throttle) pushNewest(b *bucket) {
	b.prev = t.newest
	if t.newest == nil {
		t.oldest = b
	} else {
		t.newest.next = b
	}
	t.newest = b
}

// clamp is the later of now and the latest time counted at: a reader's view never goes back.
func (r *Registry) clamp(now int64) int64 {
	if now < r.last {
		return r.last
	}
	r.last = now
	return now
}
