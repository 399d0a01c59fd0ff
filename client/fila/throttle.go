package fila

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// NewThrottle starts a throttle declaration named name (throttling.md); chain Limit, KeyedBy and
// UnthrottledWhenKeyMissing, then pass it in ConsumeOptions.Throttles:
//
//	stripe := fila.NewThrottle("stripe").Limit(100, time.Second)
//	perMerchant := fila.NewThrottle("stripe-merchant").
//		Limit(5, time.Second).
//		KeyedBy(fila.HeaderPart("merchant"))
//	cons, err := c.Consume(ctx, "payments", fila.ConsumeOptions{Throttles: []fila.Throttle{stripe, perMerchant}})
//
// Every subscription declaring the same name, on any queue, shares its buckets; the server
// refuses a malformed declaration (ErrInvalidThrottle) and one whose key or missing-key policy
// differs from the live declarations of that name (ErrThrottleConflict).
func NewThrottle(name string) Throttle { return Throttle{Name: name} }

// Limit adds "at most n deliveries in any sliding window of window" (window is sent in whole
// milliseconds).
func (t Throttle) Limit(n uint64, window time.Duration) Throttle {
	t.Limits = append(t.Limits[:len(t.Limits):len(t.Limits)], ThrottleLimit{Max: n, Window: window})
	return t
}

// KeyedBy gives the throttle one bucket per distinct value of the key made of parts (header,
// fairness key or attribute parts); without it, one bucket holds every message.
func (t Throttle) KeyedBy(parts ...KeyPart) Throttle {
	t.Key = append(Key(nil), parts...)
	return t
}

// UnthrottledWhenKeyMissing lets messages missing the key pass the throttle; by default they
// share one bucket.
func (t Throttle) UnthrottledWhenKeyMissing() Throttle {
	t.WhenKeyMissing = fibp.WhenKeyMissingUnthrottled
	return t
}

// ParseThrottle reads the form FormatThrottle writes (and the CLI's --throttle):
//
//	NAME=N/WINDOW[,N/WINDOW…][;key=KEY][;missing=unthrottled|shared]
//
// WINDOW is a Go duration ("1s", "500ms", "1m") and KEY is ParseKey's form, for example
// "stripe=100/1s,1000/1m" or "merchant=5/1s;key=header:merchant;missing=unthrottled".
func ParseThrottle(s string) (Throttle, error) {
	bad := func(format string, args ...any) (Throttle, error) {
		return Throttle{}, fmt.Errorf("fila: bad throttle %q: %s (want NAME=N/WINDOW[,N/WINDOW…][;key=KEY][;missing=unthrottled])",
			s, fmt.Sprintf(format, args...))
	}
	fields := strings.Split(s, ";")
	name, limits, ok := strings.Cut(fields[0], "=")
	if !ok || strings.TrimSpace(name) == "" {
		return bad("no NAME=")
	}
	t := NewThrottle(strings.TrimSpace(name))
	for _, l := range strings.Split(limits, ",") {
		n, w, ok := strings.Cut(strings.TrimSpace(l), "/")
		max, err := strconv.ParseUint(n, 10, 64)
		if !ok || err != nil {
			return bad("limit %q is not N/WINDOW", l)
		}
		window, err := time.ParseDuration(w)
		if err != nil {
			return bad("limit %q: %v", l, err)
		}
		t = t.Limit(max, window)
	}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		switch {
		case k == "key":
			key, err := ParseKey(v)
			if err != nil {
				return bad("%v", err)
			}
			t.Key = key
		case k == "missing" && v == "unthrottled":
			t.WhenKeyMissing = fibp.WhenKeyMissingUnthrottled
		case k == "missing" && v == "shared":
			t.WhenKeyMissing = fibp.WhenKeyMissingSharedBucket
		default:
			return bad("unknown part %q", f)
		}
	}
	return t, nil
}

// FormatThrottle renders t in the form ParseThrottle reads.
func FormatThrottle(t Throttle) string {
	var b strings.Builder
	b.WriteString(t.Name + "=" + FormatLimits(t.Limits))
	if len(t.Key) > 0 {
		b.WriteString(";key=" + FormatKey(t.Key))
	}
	if t.WhenKeyMissing == fibp.WhenKeyMissingUnthrottled {
		b.WriteString(";missing=unthrottled")
	}
	return b.String()
}

// FormatLimits renders limits as "N/WINDOW,N/WINDOW".
func FormatLimits(ls []ThrottleLimit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = strconv.FormatUint(l.Max, 10) + "/" + l.Window.String()
	}
	return strings.Join(parts, ",")
}
