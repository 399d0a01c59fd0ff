// Package wire holds the hand-written primitives that the generated protocol codecs share: a bounded
// Reader with a sticky error, Append helpers for every primitive, and the Optional and UUID value types.
//
// It depends on the standard library only. Codecs for individual frames are generated from the YAML
// specs in spec/ and live in the sibling packages; nothing here knows about any one protocol.
//
// Ownership: every []byte the Reader hands out is a sub-slice of the buffer it was given, capped with a
// full slice expression (b[i:j:j]) so that appending to it can never overwrite the bytes that follow.
// Such a slice is valid exactly as long as the caller keeps the input buffer unchanged.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Decoding errors. They are wrapped in a *DecodeError that records where decoding stopped.
var (
	ErrTruncated   = errors.New("truncated")
	ErrTooLong     = errors.New("length exceeds limit")
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	ErrInvalidBool = errors.New("boolean byte is neither 0 nor 1")
	ErrCount       = errors.New("count exceeds what the remaining bytes can hold")
	ErrTrailing    = errors.New("unexpected trailing bytes")
	ErrMemory      = errors.New("decoded form exceeds the memory allowed for it")
)

// DecodeError reports a decoding failure and the byte offset in the body at which it happened.
type DecodeError struct {
	Offset int   // offset of the field that failed
	Err    error // one of the Err* values above
}

func (e *DecodeError) Error() string { return fmt.Sprintf("%v at offset %d", e.Err, e.Offset) }
func (e *DecodeError) Unwrap() error { return e.Err }

// Reader decodes primitives from a byte slice. The first failure sticks: every later read returns
// the zero value, and Err reports the failure once decoding is done. A Reader never panics and
// never reads past its buffer.
type Reader struct {
	buf []byte
	off int
	err error

	// recent interns the last few decoded strings, so that a batch naming the same queue and
	// fairness key a hundred times allocates each once.
	recent [4]string
	next   uint8

	limited bool  // Charge counts against allow
	allow   int64 // bytes of memory decoding may still take beyond what the input justifies
}

// NewReader returns a Reader over b. The Reader does not copy b.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// Reset points the Reader at b and clears its error, so one Reader can be reused without allocating.
func (r *Reader) Reset(b []byte) {
	r.buf, r.off, r.err = b, 0, nil // recent strings stay: they are copies, not aliases
	r.limited, r.allow = false, 0
}

// Allow limits the memory that decoding may take beyond what the input's bytes justify — a map's
// entries — to n bytes until the next Reset: past it, decoding fails with ErrMemory.
func (r *Reader) Allow(n int64) { r.limited, r.allow = true, n }

// MapEntryMemory is what one decoded map[string]string entry costs beyond its strings' bytes:
// its share of the map's groups (control byte, key and value headers, load-factor slack) and of
// the tables left behind as the map grows (measured: up to ~80 bytes live per entry).
const MapEntryMemory = 96

// Charge counts n bytes of memory decoding is about to take against the Allow limit.
func (r *Reader) Charge(n int) {
	if !r.limited || r.err != nil {
		return
	}
	if r.allow -= int64(n); r.allow < 0 {
		r.Fail(ErrMemory)
	}
}

// Err returns the first error encountered, or nil.
func (r *Reader) Err() error { return r.err }

// Offset returns how many bytes have been consumed.
func (r *Reader) Offset() int { return r.off }

// Len returns the number of unread bytes (0 after an error).
func (r *Reader) Len() int {
	if r.err != nil {
		return 0
	}
	return len(r.buf) - r.off
}

// Fail records err at the current offset unless an error is already recorded.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = &DecodeError{Offset: r.off, Err: err}
	}
}

// ExpectEnd fails with ErrTrailing when unread bytes remain.
func (r *Reader) ExpectEnd() {
	if r.Len() > 0 {
		r.Fail(ErrTrailing)
	}
}

// take returns the next n bytes or nil after recording ErrTruncated.
func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.buf)-r.off < n {
		r.Fail(ErrTruncated)
		return nil
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// U8 reads one byte.
func (r *Reader) U8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

// U16 reads a big-endian uint16.
func (r *Reader) U16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

// U32 reads a big-endian uint32.
func (r *Reader) U32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// U64 reads a big-endian uint64.
func (r *Reader) U64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// I64 reads a big-endian two's-complement int64.
func (r *Reader) I64() int64 { return int64(r.U64()) }

// F64 reads a big-endian IEEE 754 double.
func (r *Reader) F64() float64 { return math.Float64frombits(r.U64()) }

// Bool reads one byte that must be 0 or 1.
func (r *Reader) Bool() bool {
	switch r.U8() {
	case 0:
		return false
	case 1:
		return true
	default:
		r.off--
		r.Fail(ErrInvalidBool)
		return false
	}
}

// UUID reads 16 raw bytes.
func (r *Reader) UUID() (u UUID) {
	if b := r.take(16); b != nil {
		copy(u[:], b)
	}
	return u
}

// Len16 reads a u16 length prefix and checks it against max.
func (r *Reader) Len16(max int) int { return r.checkLen(int(r.U16()), max) }

// Len32 reads a u32 length prefix and checks it against max.
func (r *Reader) Len32(max int) int { return r.checkLen(int(r.U32()), max) }

func (r *Reader) checkLen(n, max int) int {
	if r.err != nil {
		return 0
	}
	if n > max {
		r.Fail(ErrTooLong)
		return 0
	}
	return n
}

// Bytes reads n raw bytes as a capped sub-slice of the input (no copy). A zero-length field
// decodes as nil.
func (r *Reader) Bytes(n int) []byte {
	b := r.take(n)
	if len(b) == 0 {
		return nil
	}
	return b
}

// Rest returns every unread byte as a capped sub-slice (no copy), failing with ErrTooLong when
// there are more than max.
func (r *Reader) Rest(max int) []byte {
	n := r.Len()
	if n > max {
		r.Fail(ErrTooLong)
		return nil
	}
	return r.Bytes(n)
}

// String reads n bytes as a string, validating UTF-8 when checkUTF8 is set. Consecutive equal
// strings share one allocation.
func (r *Reader) String(n int, checkUTF8 bool) string {
	b := r.take(n)
	if len(b) == 0 {
		return ""
	}
	if checkUTF8 && !utf8.Valid(b) {
		r.off -= n
		r.Fail(ErrInvalidUTF8)
		return ""
	}
	for _, s := range r.recent {
		if string(b) == s { // the comparison does not allocate
			return s
		}
	}
	s := string(b)
	r.recent[r.next%uint8(len(r.recent))] = s
	r.next++
	return s
}

// Count reads a collection count of the given wire width (2 or 4 bytes) and checks that the
// remaining bytes can hold that many elements of at least minSize bytes each, so that a hostile
// count can never make the caller allocate more than the input justifies.
func (r *Reader) Count(width, minSize int) int {
	var n int
	if width == 2 {
		n = int(r.U16())
	} else {
		n = int(r.U32())
	}
	if r.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > (len(r.buf)-r.off)/minSize {
		r.off -= width
		r.Fail(ErrCount)
		return 0
	}
	return n
}

// Present reads the presence byte of an optional<T>.
func (r *Reader) Present() bool { return r.Bool() }

// maxMapHint is the most entries a decoder preallocates for a map: one group of Go's map layout.
const maxMapHint = 8

// MapHint is the capacity to preallocate for a map whose count field says n entries. Entries may
// repeat a key, so n bounds the map's final size without justifying it: a count of 65,535 entries
// that all name the same key makes a one-entry map. Past the first few entries the map grows as
// distinct keys arrive, so its memory follows what it holds.
func MapHint(n int) int { return min(n, maxMapHint) }
