package stream

import (
	"encoding/binary"
	"fmt"

	"github.com/filamq/fila/generated/riftstore"
)

// Key layout: see the package doc of generated/riftstore. Names never contain NUL, so
// "<name>\x00" is an unambiguous prefix.
const (
	kindMeta       = 'm'
	kindRecord     = 'r'
	kindConsumer   = 'c'
	kindPending    = 'p'
	kindDefinition = 'd'
)

func metaKey(stream string) []byte { return append([]byte{kindMeta}, stream...) }

func definitionKey(stream string) []byte { return append([]byte{kindDefinition}, stream...) }

// streamPrefixes returns the prefixes of every key holding a stream's records, consumers and
// pending deliveries ("<kind><name>\x00").
func streamPrefixes(stream string) [][]byte {
	var out [][]byte
	for _, k := range []byte{kindRecord, kindConsumer, kindPending} {
		out = append(out, append(append([]byte{k}, stream...), 0))
	}
	return out
}

func recordKey(dst []byte, stream string, seq uint64) []byte {
	dst = append(append(dst, kindRecord), stream...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// recordBounds returns the key range of a stream's records.
func recordBounds(stream string) (lo, hi []byte) {
	lo = append(append([]byte{kindRecord}, stream...), 0)
	hi = append(append([]byte{kindRecord}, stream...), 1)
	return lo, hi
}

// seqOf extracts the sequence from a record or pending key.
func seqOf(key []byte) uint64 {
	if len(key) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(key[len(key)-8:])
}

func consumerKey(stream, owner, name string) []byte {
	k := append(append([]byte{kindConsumer}, stream...), 0)
	k = append(append(k, owner...), 0)
	return append(k, name...)
}

func pendingPrefix(stream, owner, name string) []byte {
	k := append(append([]byte{kindPending}, stream...), 0)
	k = append(append(k, owner...), 0)
	return append(append(k, name...), 0)
}

func pendingKey(prefix []byte, seq uint64) []byte {
	k := append(make([]byte, 0, len(prefix)+8), prefix...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// prefixEnd returns the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func encode(r riftstore.Frame) []byte {
	b := make([]byte, 0, 1+r.Size())
	return r.AppendTo(append(b, byte(r.Opcode())))
}

func decode(val []byte, r riftstore.Frame) error {
	if len(val) == 0 || riftstore.Opcode(val[0]) != r.Opcode() {
		return fmt.Errorf("stream: corrupt record, want %v", r.Opcode())
	}
	if err := r.Decode(val[1:]); err != nil {
		return fmt.Errorf("stream: corrupt record: %w", err)
	}
	return nil
}
