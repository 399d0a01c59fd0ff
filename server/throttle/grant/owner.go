package grant

import (
	"errors"
	"slices"

	"github.com/filamq/fila/server/throttle"
)

// Config is the protocol's settings, the same on every node.
type Config struct {
	// LeaseMs is how long a borrower may spend a grant, from when it asked.
	LeaseMs int64
	// MaxGrantShare bounds one grant to max(1, N/MaxGrantShare) tokens of the bucket's smallest
	// limit N, so that several borrowers share a saturated bucket.
	MaxGrantShare uint64
}

// DefaultConfig is what the broker uses.
var DefaultConfig = Config{LeaseMs: 200, MaxGrantShare: 8}

// ErrConfig is a Config or limits the protocol cannot run with.
var ErrConfig = errors.New("grant: invalid configuration")

func (c Config) check(limits []throttle.Limit) error {
	if c.LeaseMs <= 0 || c.MaxGrantShare == 0 || len(limits) == 0 {
		return ErrConfig
	}
	for _, l := range limits {
		if l.Max == 0 || l.WindowMs == 0 {
			return ErrConfig
		}
	}
	return nil
}

// GrantID names one grant: the owner's epoch (a new owner has a larger one, so a Return of its
// predecessor's grant is recognised as not its own) and a sequence number within it.
type GrantID struct {
	Epoch uint64
	Seq   uint64
}

// Request is a borrower's ask for tokens of one bucket.
type Request struct {
	Bucket string
	Seq    uint64 // the borrower's, echoed in the Grant
	SentAt int64  // the borrower's clock when it sent it
	Want   uint64
	// Returns settles grants of the same bucket the borrower finished.
	Returns []Return
}

// Grant answers a Request: N tokens spendable until the borrower's SentAt + LeaseMs, or N = 0
// and RetryAt, when to ask again.
type Grant struct {
	Bucket  string
	ID      GrantID
	ReqSeq  uint64
	N       uint64
	LeaseMs int64
	RetryAt int64
}

// Return settles a grant: Unspent of its tokens were not spent and never will be.
type Return struct {
	ID      GrantID
	Unspent uint64
}

// Owner is the owner node's side for one throttle: its effective limits and its buckets. It is
// not safe for concurrent use.
type Owner struct {
	cfg       Config
	limits    []throttle.Limit
	maxWindow int64
	minMax    uint64
	epoch     uint64
	seq       uint64
	last      int64
	buckets   map[string]*ledger
	// forgotten: tokens recorded at or before it may be unknown here (a predecessor's, or those
	// of buckets dropped once empty), so a window starting at or before it counts as full.
	forgotten    int64
	hasForgotten bool
	sweepAt      int // bucket count at which the next new bucket sweeps the empty ones
}

// MaxBuckets bounds the buckets an owner holds at once (each holds tokens inside its windows): a
// request for a new bucket beyond it waits (RetryAt) until some empty out.
const MaxBuckets = 1 << 17

// bucketRetryMs is when a request refused for want of bucket room is worth sending again.
const bucketRetryMs = 100

// NewOwner is the first owner of a throttle with these effective limits: nothing was delivered
// before it. epoch must be larger than every earlier owner's.
func NewOwner(cfg Config, limits []throttle.Limit, epoch uint64) (*Owner, error) {
	if err := cfg.check(limits); err != nil {
		return nil, err
	}
	o := &Owner{cfg: cfg, epoch: epoch, buckets: map[string]*ledger{}}
	o.setLimits(limits)
	return o, nil
}

// SetLimits replaces the effective limits (the declarations changed). A limit whose window is
// longer than those the owner kept tokens for counts as full until the window holds only tokens
// it knows of.
func (o *Owner) SetLimits(limits []throttle.Limit) error {
	if err := o.cfg.check(limits); err != nil {
		return err
	}
	o.setLimits(limits)
	return nil
}

func (o *Owner) setLimits(limits []throttle.Limit) {
	o.limits, o.maxWindow, o.minMax = slices.Clone(limits), 0, limits[0].Max
	for _, l := range limits {
		o.maxWindow = max(o.maxWindow, l.Span())
		o.minMax = min(o.minMax, l.Max)
	}
}

// Limits are the effective limits.
func (o *Owner) Limits() []throttle.Limit { return slices.Clone(o.limits) }

// TakeOver is an owner replacing one that issues nothing after since: it issues no token before
// since + LeaseMs + the largest window (the previous owners' tokens are all spent and out of
// every window a new token can share).
func TakeOver(cfg Config, limits []throttle.Limit, epoch uint64, since int64) (*Owner, error) {
	o, err := NewOwner(cfg, limits, epoch)
	if err != nil {
		return nil, err
	}
	o.forgotten, o.hasForgotten = since+cfg.LeaseMs, true // the predecessors' tokens: spent by then
	o.last = since
	return o, nil
}

// Epoch is the owner's epoch.
func (o *Owner) Epoch() uint64 { return o.epoch }

// clamp keeps the owner's time from going back.
func (o *Owner) clamp(now int64) int64 {
	o.last = max(o.last, now)
	return o.last
}

// bucket is bucket k's ledger, pruned at now (nil when there is none and no room for one).
func (o *Owner) bucket(k string, now int64) *ledger {
	b := o.buckets[k]
	if b == nil {
		if len(o.buckets) >= o.sweepAt {
			o.sweep(now) // amortized: the buckets at most double between sweeps
			o.sweepAt = max(64, 2*len(o.buckets))
		}
		if len(o.buckets) >= MaxBuckets {
			return nil
		}
		b = &ledger{grants: map[uint64]outstanding{}, pruned: o.forgotten, hasPruned: o.hasForgotten}
		o.buckets[k] = b
	}
	b.prune(now - o.maxWindow)
	return b
}

// sweep drops the buckets that hold no token any window can count; what they forgot stays
// forgotten (o.forgotten).
func (o *Owner) sweep(now int64) {
	before := now - o.maxWindow
	for k, b := range o.buckets {
		if b.prune(before); len(b.entries) == 0 && len(b.grants) == 0 {
			if !o.hasForgotten || b.pruned > o.forgotten {
				o.forgotten, o.hasForgotten = b.pruned, true
			}
			delete(o.buckets, k)
		}
	}
}

// room is how many tokens bucket b may issue at now under every limit, and when it will have
// room for one when it has none.
func (o *Owner) room(b *ledger, now int64) (n uint64, retryAt int64) {
	n = ^uint64(0)
	for _, l := range o.limits {
		if after := now - l.Span(); !b.known(after) {
			return 0, b.pruned + l.Span() // tokens it does not know of may be inside: full
		}
		c := b.count(now - l.Span())
		if c >= l.Max {
			return 0, b.nextRoom(now, l)
		}
		n = min(n, l.Max-c)
	}
	return n, 0
}

// Serve answers a Request arriving at now: it first applies the Request's Returns, then grants
// what the bucket has room for, up to Want and the grant bound.
func (o *Owner) Serve(now int64, r Request) Grant {
	now = o.clamp(now)
	o.Settle(now, r.Bucket, r.Returns)
	g := Grant{Bucket: r.Bucket, ReqSeq: r.Seq, LeaseMs: o.cfg.LeaseMs}
	b := o.bucket(r.Bucket, now)
	if b == nil {
		g.RetryAt = now + bucketRetryMs
		return g
	}
	room, retryAt := o.room(b, now)
	n := min(r.Want, room, max(1, o.minMax/o.cfg.MaxGrantShare))
	if n == 0 {
		g.RetryAt = max(retryAt, now+1)
		return g
	}
	o.seq++
	g.ID, g.N = GrantID{Epoch: o.epoch, Seq: o.seq}, n
	b.grants[o.seq] = outstanding{n: n, end: now + o.cfg.LeaseMs}
	return g
}

// Settle applies Returns arriving at now without a Request.
func (o *Owner) Settle(now int64, bucket string, rets []Return) {
	now = o.clamp(now)
	b := o.buckets[bucket]
	if b == nil {
		return // no grant of it is outstanding
	}
	for _, ret := range rets {
		o.settle(b, now, ret)
	}
}

func (o *Owner) settle(b *ledger, now int64, ret Return) {
	if ret.ID.Epoch != o.epoch {
		return // a predecessor's grant: counted by the blind start
	}
	g, ok := b.grants[ret.ID.Seq]
	if !ok {
		return // already settled, or expired and recorded at its end
	}
	delete(b.grants, ret.ID.Seq)
	if spent := g.n - min(g.n, ret.Unspent); spent > 0 {
		b.record(min(now, g.end), spent)
	}
}

// Take is a delivery by the owner's own node at now: it counts one token at now if every limit
// has room, and otherwise reports when to try again.
func (o *Owner) Take(now int64, bucket string) (ok bool, retryAt int64) {
	if ok, retryAt = o.Room(now, bucket); ok {
		o.buckets[bucket].record(now, 1)
	}
	return ok, retryAt
}

// Room reports whether Take would count a delivery at now (and, when not, when to try again),
// counting nothing: a delivery through several throttles asks each first.
func (o *Owner) Room(now int64, bucket string) (ok bool, retryAt int64) {
	if now < o.last {
		return false, o.last // a delivery is counted at its own time, never a later one
	}
	now = o.clamp(now)
	b := o.bucket(bucket, now)
	if b == nil {
		return false, now + bucketRetryMs
	}
	if room, at := o.room(b, now); room == 0 {
		return false, max(at, now+1)
	}
	return true, 0
}

// Counted is what each limit of the bucket counts at now (GetThrottleBucket's counted: deliveries
// and outstanding grants inside the window); a window that may hold tokens the owner does not
// know of (a predecessor's) counts as full.
func (o *Owner) Counted(now int64, bucket string) []uint64 {
	now = o.clamp(now)
	out := make([]uint64, len(o.limits))
	b := o.buckets[bucket]
	if b == nil {
		b = &ledger{pruned: o.forgotten, hasPruned: o.hasForgotten}
	}
	for i, l := range o.limits {
		if after := now - l.Span(); !b.known(after) {
			out[i] = l.Max
		} else {
			out[i] = b.count(after)
		}
	}
	return out
}

// Stats counts the buckets with tokens inside a window (active) and those without room now
// (atLimit), at now.
func (o *Owner) Stats(now int64) (active, atLimit uint64) {
	now = o.clamp(now)
	o.sweep(now)
	for _, b := range o.buckets {
		active++ // sweep left only buckets with tokens inside the largest window
		if room, _ := o.room(b, now); room == 0 {
			atLimit++
		}
	}
	return active, atLimit
}

// NextRoom is when one more delivery fits every limit of bucket at now; 0 when it fits now.
func (o *Owner) NextRoom(now int64, bucket string) int64 {
	now = o.clamp(now)
	b := o.buckets[bucket]
	if b == nil {
		b = &ledger{pruned: o.forgotten, hasPruned: o.hasForgotten}
	} else {
		b.prune(now - o.maxWindow)
	}
	if room, at := o.room(b, now); room == 0 {
		return max(at, now+1)
	}
	return 0
}
