package wire

import (
	"encoding/binary"
	"math"
	"slices"
)

// The Append functions encode one primitive at the end of b and return the extended slice. They
// allocate only when b lacks capacity.

// AppendU8 appends one byte.
func AppendU8(b []byte, v uint8) []byte { return append(b, v) }

// AppendU16 appends a big-endian uint16.
func AppendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

// AppendU32 appends a big-endian uint32.
func AppendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// AppendU64 appends a big-endian uint64.
func AppendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// AppendI64 appends a big-endian two's-complement int64.
func AppendI64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// AppendF64 appends a big-endian IEEE 754 double.
func AppendF64(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(b, math.Float64bits(v))
}

// AppendBool appends 1 for true and 0 for false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendUUID appends 16 raw bytes.
func AppendUUID(b []byte, u UUID) []byte { return append(b, u[:]...) }

// AppendString16 appends a u16-length-prefixed string. The caller keeps len(s) within the limit;
// Check functions in the generated code report violations before encoding.
func AppendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// AppendString32 appends a u32-length-prefixed string.
func AppendString32(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendBytes16 appends u16-length-prefixed raw bytes.
func AppendBytes16(b []byte, v []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...)
}

// AppendBytes32 appends u32-length-prefixed raw bytes.
func AppendBytes32(b []byte, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// AppendCount appends a collection count of the given wire width (2 or 4 bytes).
func AppendCount(b []byte, width int, n int) []byte {
	if width == 2 {
		return binary.BigEndian.AppendUint16(b, uint16(n))
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// SortedKeys returns the keys of m in ascending order, so that maps encode deterministically.
// Maps of up to 16 entries use the caller's scratch array and do not allocate.
func SortedKeys(m map[string]string, scratch *[16]string) []string {
	keys := scratch[:0]
	if len(m) > len(scratch) {
		keys = make([]string, 0, len(m))
	}
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		slices.Sort(keys)
	}
	return keys
}
