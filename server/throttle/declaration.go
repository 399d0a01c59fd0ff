package throttle

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/filamq/fila/server/keys"
)

// Limit is "at most Max deliveries in any sliding window of WindowMs milliseconds".
type Limit struct {
	Max      uint64
	WindowMs uint64
}

func (l Limit) String() string { return fmt.Sprintf("%d per %d ms", l.Max, l.WindowMs) }

// implies reports whether a makes b redundant: every window of b.WindowMs lies inside one of
// a.WindowMs, which holds at most a.Max ≤ b.Max deliveries, so b can never apply.
func (a Limit) implies(b Limit) bool { return a.Max <= b.Max && a.WindowMs >= b.WindowMs }

// compareLimits orders limits by window, then maximum: the order of effective limits everywhere
// (throttle_summary, bucket_stats).
func compareLimits(a, b Limit) int {
	if c := cmp.Compare(a.WindowMs, b.WindowMs); c != 0 {
		return c
	}
	return cmp.Compare(a.Max, b.Max)
}

// Policy is what happens to a message missing the throttle's key (FIBP when_key_missing).
type Policy uint8

const (
	// SharedBucket: such messages share one bucket (bucket kind MissingKeyShared).
	SharedBucket Policy = 0
	// Unthrottled: such messages pass the throttle freely.
	Unthrottled Policy = 1
)

func (p Policy) String() string {
	switch p {
	case SharedBucket:
		return "shared_bucket"
	case Unthrottled:
		return "unthrottled"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Declaration is one throttle declared by a subscription.
type Declaration struct {
	Name           string
	Limits         []Limit
	Key            keys.Key // empty: one bucket for every message
	WhenKeyMissing Policy
}

// Errors, matched with errors.Is. Their protocol codes are InvalidThrottle, ThrottleConflict,
// ChannelFull and ThrottleNotFound. ErrFull refuses a well-formed declaration for now: the
// buckets' state is at its bound, and a retry may find room once dormant buckets are forgotten.
var (
	ErrInvalid  = errors.New("throttle: invalid declaration")
	ErrConflict = errors.New("throttle: conflicting declaration")
	ErrFull     = errors.New("throttle: the buckets' state is at its bound")
	ErrNotFound = errors.New("throttle: not found")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func full(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFull, fmt.Sprintf(format, args...))
}

// Bounds on declarations, so that a subscription cannot make every delivery (and every bucket)
// walk thousands of limits. The spec is silent; more than a few limits per throttle has no use.
const (
	MaxThrottles      = 16 // declarations per subscription
	MaxLimits         = 16 // limits per declaration
	MaxDeclaredLimits = 64 // distinct limits of one throttle across its live subscriptions
)

// maxSpanMs is the longest window the arithmetic on times uses: a longer window (up to 2^64 - 1
// ms) acts as this one, which is longer than any server runs (≈ 142,000 years), so that
// now ± window never leaves int64.
const maxSpanMs = 1 << 52

// span is l's window in milliseconds for arithmetic on times.
func (l Limit) span() int64 { return int64(min(l.WindowMs, maxSpanMs)) }

// Span is l's window in milliseconds for arithmetic on times (at most 2^52).
func (l Limit) Span() int64 { return l.span() }

// Validate checks the declarations of one subscription (throttling.md): at most MaxThrottles;
// every one has a name, used once; one to MaxLimits limits, none with a zero maximum or window,
// none implied by another of the same declaration (it could never apply); a key valid for
// throttles; a known policy.
func Validate(ds []Declaration) error {
	if len(ds) > MaxThrottles {
		return invalid("%d throttles declared; at most %d per subscription", len(ds), MaxThrottles)
	}
	for i, d := range ds {
		switch {
		case len(d.Limits) > MaxLimits:
			return invalid("throttle %q has %d limits; at most %d", d.Name, len(d.Limits), MaxLimits)
		case d.Name == "":
			return invalid("throttle %d has an empty name", i)
		case slices.ContainsFunc(ds[:i], func(o Declaration) bool { return o.Name == d.Name }):
			return invalid("throttle %q is declared twice", d.Name)
		case len(d.Limits) == 0:
			return invalid("throttle %q has no limits", d.Name)
		case d.WhenKeyMissing != SharedBucket && d.WhenKeyMissing != Unthrottled:
			return invalid("throttle %q: unknown when_key_missing %d", d.Name, uint8(d.WhenKeyMissing))
		}
		if err := d.Key.Check(keys.Throttle); err != nil {
			return invalid("throttle %q: %v", d.Name, err)
		}
		for j, l := range d.Limits {
			if l.Max == 0 || l.WindowMs == 0 {
				return invalid("throttle %q limit %d: max_deliveries and window_ms must be at least 1 (got %v)", d.Name, j, l)
			}
			for k, o := range d.Limits {
				if k != j && o.implies(l) && (o != l || k < j) {
					return invalid("throttle %q limit %d (%v) can never apply: limit %d (%v) is as strict", d.Name, j, l, k, o)
				}
			}
		}
	}
	return nil
}

// effective returns the limits of ls that can apply (those no other limit implies), each once, in
// compareLimits order.
// Effective is the limits of ls that apply: without duplicates and those another implies, in
// compareLimits order (a cluster throttle's owner joins every node's limits with it).
func Effective(ls []Limit) []Limit { return effective(ls) }

func effective(ls []Limit) []Limit {
	var out []Limit
	for i, l := range ls {
		dup := slices.Index(ls, l) < i
		implied := slices.ContainsFunc(ls, func(o Limit) bool { return o != l && o.implies(l) })
		if !dup && !implied {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, compareLimits)
	return out
}
