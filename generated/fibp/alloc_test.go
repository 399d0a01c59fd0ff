package fibp

import (
	"runtime"
	"testing"

	"github.com/filamq/fila/generated/wire"
)

// A message declaring 65,535 headers that all repeat one empty key decodes into a one-entry map:
// the count alone never sizes the map (issue 16, item 2).
func TestDecodeRepeatedHeaderKeyAllocatesLittle(t *testing.T) {
	const n = 65535
	var b []byte
	b = wire.AppendCount(b, 4, 1)
	b = wire.AppendString16(b, "q")
	b = wire.AppendCount(b, 2, n)
	for range n {
		b = wire.AppendString16(b, "")
		b = wire.AppendString16(b, "")
	}
	b = wire.AppendBytes32(b, nil)
	b = append(b, 0, 0, 0, 0)

	var x Enqueue
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := x.Decode(b); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := len(x.Messages[0].Headers); got != 1 {
		t.Fatalf("%d headers, want 1", got)
	}
	// The old decoder preallocated a 65,535-entry map: about 2.5 MB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<10 {
		t.Fatalf("decoding allocated %d bytes for a one-entry map from %d wire bytes", alloc, len(b))
	}
}
