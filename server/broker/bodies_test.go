package broker

import (
	"encoding/binary"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/engine"
)

// The body cache answers get with exactly what it holds — the shortcut for IDs older than all it
// can hold never hides a cached body, also after puts out of ID order and a clear — and trimming
// keeps it within its budget without dropping a body whose entry was not applied yet; nor does
// its insertion order keep more than about twice the IDs it holds (acked bodies are stepped
// over), however many messages go through a queue that never fills the budget; and a queue
// holding more messages than the budget could cache keeps only the bodies not yet applied.
func TestBodyCacheAnswersWhatItHoldsWithinItsBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var total atomic.Int64
		c := newBodyCache(rapid.IntRange(1, 2000).Draw(t, "budget"), &total)
		c.slack = rapid.IntRange(0, 8).Draw(t, "slack")
		held := map[engine.MsgID]int{} // what was put and not removed or trimmed, by payload size
		var ever []engine.MsgID
		next := uint64(1 << 20)
		id := func(n uint64) (m engine.MsgID) { binary.BigEndian.PutUint64(m[:8], n); return m }
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3: // enqueue: IDs ascend, now and then one below (another source's)
				n := next
				if rapid.IntRange(0, 20).Draw(t, "older") == 0 {
					n = rapid.Uint64Range(0, next).Draw(t, "below")
				}
				next += 1 + rapid.Uint64Range(0, 3).Draw(t, "step")
				m := id(n)
				if _, ok := held[m]; ok || c.m[m] != nil {
					continue
				}
				size := rapid.IntRange(0, 300).Draw(t, "size")
				c.put(m, &body{payload: make([]byte, size)})
				held[m] = size
				ever = append(ever, m)
			case 4: // ack
				if len(ever) > 0 {
					m := rapid.SampledFrom(ever).Draw(t, "acked")
					c.remove(m)
					delete(held, m)
				}
			case 5, 6: // a round's entry is applied, and the next round trims
				c.applied(c.base + int64(rapid.IntRange(0, len(c.order)).Draw(t, "applied")))
				mark := c.mark.Load()
				stored := rapid.IntRange(0, 40).Draw(t, "stored")
				deep := len(c.m) > 0 && int64(stored)*c.bytes/int64(len(c.m)) > c.max
				c.trim(stored)
				if deep && c.head < len(c.order) && c.base+int64(c.head) < mark {
					t.Fatalf("a queue deeper than the budget kept an applied body")
				}
				for pos, m := range c.order[:c.head] {
					if c.base+int64(pos) >= mark {
						t.Fatalf("trimmed %v at position %d, not applied (mark %d)", m, c.base+int64(pos), mark)
					}
				}
				if c.total.Load() > c.max && c.head < len(c.order) && c.base+int64(c.head) < mark {
					t.Fatalf("over budget (%d > %d) with applied bodies left", c.total.Load(), c.max)
				}
				if c.sparse() && c.base+int64(c.head) < mark {
					t.Fatalf("the order keeps %d applied IDs for %d bodies held", len(c.order)-c.head, len(c.m))
				}
				if c.head < len(c.order) && c.base+int64(c.head) < mark && c.m[c.order[c.head]] == nil {
					t.Fatalf("the order starts with a removed ID below the applied mark")
				}
				for m := range held {
					if c.m[m] == nil {
						delete(held, m) // trimmed
					}
				}
			case 7: // reload
				c.clear()
				clear(held)
			default:
			}
			for _, m := range ever {
				b, ok := c.get(m)
				size, want := held[m]
				if ok != want || (ok && len(b.payload) != size) {
					t.Fatalf("get %x: cached %v, want %v", m[:8], ok, want)
				}
			}
			sum := 0
			for _, size := range held {
				sum += (&body{payload: make([]byte, size)}).size()
			}
			if int64(sum) != total.Load() || c.bytes != total.Load() {
				t.Fatalf("counted %d bytes, holds %d", total.Load(), sum)
			}
		}
	})
}
