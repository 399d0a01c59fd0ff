package queuegroup

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/engine"
)

// The dedup memory against a naive twin: after any sequence of remember and forget, it knows
// exactly the identities whose latest window has not ended, and forget never scans.
func TestDedupMemoryMatchesNaiveTwin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := newDedupMemory()
		twin := map[Identity]int64{}
		now := int64(0)
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			ident := Identity{byte(rapid.IntRange(0, 20).Draw(t, "ident"))}
			if rapid.Bool().Draw(t, "remember") {
				if _, dup := d.lookup(ident, now); !dup {
					until := now + int64(rapid.IntRange(1, 50).Draw(t, "window"))
					d.remember(ident, engine.MsgID{ident[0]}, until)
					twin[ident] = until
				}
				continue
			}
			now += int64(rapid.IntRange(0, 20).Draw(t, "dt"))
			d.forget(now)
			for id, until := range twin {
				if until <= now {
					delete(twin, id)
				}
			}
			if len(d.ids) != len(twin) {
				t.Fatalf("remembers %d identities, twin %d", len(d.ids), len(twin))
			}
			for id, until := range twin {
				if e, ok := d.ids[id]; !ok || e.until != until {
					t.Fatalf("identity %x: %+v, twin until %d", id, e, until)
				}
			}
			for i := 1; i < len(d.order); i++ {
				if d.order[i].less(&d.order[(i-1)/2]) {
					t.Fatalf("heap order broken at %d", i)
				}
			}
		}
	})
}
