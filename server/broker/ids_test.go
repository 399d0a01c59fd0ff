package broker

import (
	"bytes"
	"testing"
)

func TestIDsAreUUIDv7AndStrictlyIncreasing(t *testing.T) {
	g := newIDGen()
	prev := g.next(1000)
	for i := range 10000 {
		now := int64(1000 + i/5000) // many IDs per millisecond: the counter overflows and borrows
		id := g.next(now)
		if bytes.Compare(id[:], prev[:]) <= 0 {
			t.Fatalf("ID %d %x not after %x", i, id, prev)
		}
		if id[6]>>4 != 7 || id[8]>>6 != 2 {
			t.Fatalf("ID %x: version %d variant %b", id, id[6]>>4, id[8]>>6)
		}
		prev = id
	}
}
