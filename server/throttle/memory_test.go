package throttle

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/keys"
)

// heldNow is what every bucket of r holds, counted afresh.
func heldNow(r *Registry) int64 {
	var n int64
	for _, m := range []map[string]*Throttle{r.throttles, r.dormant} {
		for _, t := range m {
			for _, b := range t.buckets {
				n += b.memory()
			}
		}
	}
	return n
}

// The registry's count of bucket memory stays exact through declarations, deliveries with new
// keys, limit changes, ends, eviction and redeclaration under another key; it never passes the
// bound by a new bucket.
func TestBucketMemoryIsCountedAndBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const bound = 20_000
		r := NewRegistry(bound)
		var live []*Subscription
		now := int64(0)
		key := keys.Key{{Kind: keys.Header, Name: "k"}}
		for step := range rapid.IntRange(1, 300).Draw(t, "steps") {
			now += rapid.Int64Range(0, 300).Draw(t, "dt")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				d := Declaration{Name: fmt.Sprint("t", rapid.IntRange(0, 2).Draw(t, "name")), Key: key,
					Limits: []Limit{{Max: rapid.Uint64Range(1, 100).Draw(t, "max"), WindowMs: rapid.Uint64Range(1, 2000).Draw(t, "window")}}}
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
				}
			default:
				if len(live) > 0 {
					s := live[rapid.IntRange(0, len(live)-1).Draw(t, "sub")]
					before := r.held
					ok, _ := r.Take(now, []Ref{{s.Throttles()[0], BucketKey{Group: fmt.Sprint(step)}}})
					if ok && r.held > bound && r.held > before {
						t.Fatalf("a new bucket took the count to %d, past the bound %d", r.held, bound)
					}
				}
			}
			if got := heldNow(r); got != r.held {
				t.Fatalf("step %d: counted %d bytes, the buckets hold %d", step, r.held, got)
			}
		}
	})
}
