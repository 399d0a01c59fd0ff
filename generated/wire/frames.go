package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// LengthSize is the size of the big-endian u32 length prefix in front of every frame body.
const LengthSize = 4

// DefaultReadBuffer is the read buffer of a FrameReader made by NewFrameReader.
const DefaultReadBuffer = 64 << 10

// minReadBuffer is the smallest read buffer a FrameReader uses: a length prefix and the body's
// first byte (for SetMaxFor) must fit.
const minReadBuffer = 16

// FrameSizeError reports a length prefix outside the accepted range. The body has not been read;
// FrameReader.Skip discards it (returning its first bytes), and so does the next call to Next.
type FrameSizeError struct {
	Length   int // the length prefix as received
	Min, Max int // the accepted range
}

func (e *FrameSizeError) Error() string {
	return fmt.Sprintf("frame length %d outside %d..%d", e.Length, e.Min, e.Max)
}

// BufferBudget approves the memory that a FrameReader or a reassembler allocates for large
// bodies: Grow is asked before n more bytes are allocated (an error refuses them), Shrink is told
// when n bytes are let go.
type BufferBudget interface {
	Grow(n int) error
	Shrink(n int)
}

// BufferError reports a frame whose body the reader's BufferBudget refused. The body has not been
// read; FrameReader.Skip discards it (returning its first bytes), and so does the next call to Next.
type BufferError struct {
	Length int   // the body's length
	Err    error // the budget's refusal
}

func (e *BufferError) Error() string {
	return fmt.Sprintf("no memory for a %d-byte frame: %v", e.Length, e.Err)
}

func (e *BufferError) Unwrap() error { return e.Err }

// ErrReleased is returned by a FrameReader used after Release.
var ErrReleased = errors.New("wire: frame reader used after Release")

// BufferPool lends read buffers of one size to FrameReaders (NewPooledFrameReader), for
// connections or streams that are many and short-lived: a stream that carries one small frame then
// costs no allocation of its own. It is safe for concurrent use.
type BufferPool struct {
	size int
	pool sync.Pool // of *readBuf, each of len size, lent by this pool
}

// NewBufferPool returns a pool of read buffers of size bytes (at least 16).
func NewBufferPool(size int) *BufferPool {
	size = max(size, minReadBuffer)
	p := &BufferPool{size: size}
	p.pool.New = func() any { return &readBuf{b: make([]byte, size), pool: p} }
	return p
}

// readBuf is a FrameReader's read buffer and the pool that lent it (nil for a reader's own).
type readBuf struct {
	b    []byte
	pool *BufferPool
}

// FrameReader reads length-prefixed frames, [u32 big-endian length][length bytes of body], the
// framing of every protocol here: FIBP connections (both sides), Rift streams (both sides), the
// queue log's snapshots. It is not safe for concurrent use.
//
// Buffers and who owns them. The reader owns a read buffer, its own or one lent by a BufferPool
// until Release, and, for bodies longer than the read buffer, a large-body buffer that it reuses.
// The body returned by Next aliases one of them (zero copy): it is valid until the next call to
// Next, Skip or Release, and the caller copies what it keeps longer. Shrink lets go of the
// large-body buffer; a body returned earlier stays valid, as that buffer is then no longer reused.
//
// Bounds. A body is accepted only within the reader's minBody..maxBody bytes and, with SetMaxFor, within
// the limit its first byte chooses; both are checked before the body is read or any memory is
// allocated for it. The large-body buffer is allocated only for an accepted length, at most
// maxBody bytes, after the BufferBudget (SetBudget) approved it; the read buffer never grows. A refused
// body is discarded through the read buffer, never held.
//
// Errors. Next returns io.EOF at a clean end of stream (the source ended between frames),
// io.ErrUnexpectedEOF when it ended inside a frame, a *FrameSizeError or a *BufferError for a
// refused frame (the stream stays framed: the next Next or Skip discards its body), ErrReleased
// after Release, and any other error of the source as it came. Such an error (an expired deadline,
// say) loses nothing: the next call to Next resumes the frame where the source stopped.
type FrameReader struct {
	src    io.Reader
	min    uint32 // the accepted body lengths (the length prefix is a u32)
	max    uint32
	maxFor func(first byte) int
	budget BufferBudget
	rb     *readBuf // the read buffer; nil after Release
	r, w   int      // unread bytes are rb.b[r:w]
	big    []byte
	n      int  // the current frame's body length, while inBody
	bigK   int  // bytes of a large body read into big so far, while inBody
	skip   int  // bytes of a refused body still to discard
	inBody bool // the current frame's length prefix is consumed; its body is still being read
	eof    bool // the source reported io.EOF
}

// NewFrameReader returns a reader of bodies of minBody..maxBody bytes from r, with a read buffer
// of DefaultReadBuffer bytes of its own.
func NewFrameReader(r io.Reader, minBody, maxBody int) *FrameReader {
	return NewFrameReaderSize(r, minBody, maxBody, DefaultReadBuffer)
}

// NewFrameReaderSize is NewFrameReader with a read buffer of size bytes (at least 16): bodies up
// to size bytes are returned from it without a copy, longer ones are read into the large-body
// buffer.
func NewFrameReaderSize(r io.Reader, minBody, maxBody, size int) *FrameReader {
	rb := &readBuf{b: make([]byte, max(size, minReadBuffer))}
	return &FrameReader{src: r, min: length32(minBody), max: length32(maxBody), rb: rb}
}

// NewPooledFrameReader is NewFrameReader with a read buffer lent by pool; Release returns it.
func NewPooledFrameReader(r io.Reader, minBody, maxBody int, pool *BufferPool) *FrameReader {
	return &FrameReader{src: r, min: length32(minBody), max: length32(maxBody), rb: pool.pool.Get().(*readBuf)}
}

// length32 clamps a body length limit to the range of the u32 length prefix.
func length32(n int) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}

// SetBudget has b approve the large-body buffer (the read buffer, allocated with the reader, is
// not asked for; the owner accounts for it).
func (fr *FrameReader) SetBudget(b BufferBudget) { fr.budget = b }

// SetMax changes the largest accepted body length.
func (fr *FrameReader) SetMax(maxBody int) { fr.max = length32(maxBody) }

// SetMaxFor installs a per-frame limit chosen by the body's first byte (an opcode), checked
// before the body is read. It is consulted only for non-empty bodies within the reader's range.
func (fr *FrameReader) SetMaxFor(f func(first byte) int) { fr.maxFor = f }

// Next reads the next frame body; see FrameReader for how long it stays valid and what errors
// mean.
func (fr *FrameReader) Next() ([]byte, error) {
	// Fast path: the length prefix and the body's first byte are buffered (never after Release),
	// and the frame is accepted and fits the read buffer.
	if !fr.inBody && fr.skip == 0 && fr.w-fr.r > LengthSize {
		n32 := binary.BigEndian.Uint32(fr.rb.b[fr.r:])
		n := int(n32)
		start := fr.r + LengthSize
		if n32 >= fr.min && n32 <= fr.max && n <= len(fr.rb.b) && (fr.maxFor == nil || n == 0 || n <= fr.maxFor(fr.rb.b[start])) {
			if end := start + n; end <= fr.w {
				fr.r = end
				return fr.rb.b[start:end:end], nil
			}
			fr.r = start
			fr.inBody, fr.n = true, n
			return fr.smallBody()
		}
	}
	return fr.next()
}

// next is Next off the fast path: a refused frame, a large body, or a length prefix not buffered.
func (fr *FrameReader) next() ([]byte, error) {
	if fr.rb == nil {
		return nil, ErrReleased
	}
	if fr.skip > 0 {
		if err := fr.discard(); err != nil {
			return nil, err
		}
	}
	if !fr.inBody {
		if err := fr.header(); err != nil {
			return nil, err
		}
	}
	if fr.n > len(fr.rb.b) {
		return fr.readBig()
	}
	return fr.smallBody()
}

// smallBody returns the current body, which fits the read buffer, once it is buffered whole.
func (fr *FrameReader) smallBody() ([]byte, error) {
	if err := fr.fill(fr.n); err != nil {
		return nil, unexpected(err)
	}
	body := fr.rb.b[fr.r : fr.r+fr.n : fr.r+fr.n]
	fr.r += fr.n
	fr.inBody = false
	return body, nil
}

// header reads and checks a length prefix. It consumes the prefix only once the frame is accepted
// (inBody) or refused (skip), so that a failed read of the source can be retried.
func (fr *FrameReader) header() error {
	if err := fr.fill(LengthSize); err != nil {
		if err == io.EOF && fr.r == fr.w {
			return io.EOF
		}
		return unexpected(err)
	}
	n32 := binary.BigEndian.Uint32(fr.rb.b[fr.r:])
	n := int(n32)
	if n32 < fr.min || n32 > fr.max {
		fr.refuse(n)
		return &FrameSizeError{Length: n, Min: int(fr.min), Max: int(fr.max)}
	}
	if fr.maxFor != nil && n > 0 {
		if err := fr.fill(LengthSize + 1); err != nil {
			return unexpected(err)
		}
		if limit := fr.maxFor(fr.rb.b[fr.r+LengthSize]); n > limit {
			fr.refuse(n)
			return &FrameSizeError{Length: n, Min: int(fr.min), Max: limit}
		}
	}
	if n > len(fr.rb.b) && cap(fr.big) < n {
		if fr.budget != nil {
			if err := fr.budget.Grow(n - cap(fr.big)); err != nil {
				fr.refuse(n)
				return &BufferError{Length: n, Err: err}
			}
		}
		fr.big = make([]byte, n)
	}
	fr.r += LengthSize
	fr.inBody, fr.n, fr.bigK = true, n, 0
	if n > len(fr.rb.b) { // the read buffer holds only (a first part of) this body
		fr.bigK = copy(fr.big[:n], fr.rb.b[fr.r:fr.w])
		fr.r, fr.w = 0, 0
	}
	return nil
}

// refuse consumes the length prefix of a refused frame and marks its n body bytes for discarding.
func (fr *FrameReader) refuse(n int) {
	fr.r += LengthSize
	fr.skip = n
}

// readBig reads the rest of the current large body into big, straight from the source.
func (fr *FrameReader) readBig() ([]byte, error) {
	for fr.bigK < fr.n {
		m, err := fr.src.Read(fr.big[fr.bigK:fr.n])
		fr.bigK += m
		if err == io.EOF {
			fr.eof = true
		}
		if err != nil && fr.bigK < fr.n {
			return nil, unexpected(err)
		}
	}
	fr.inBody = false
	return fr.big[:fr.n:fr.n], nil
}

// fill makes at least n bytes (n ≤ len(buf)) available in buf[r:w], moving the unread bytes to
// the front of buf when n would not fit behind them.
func (fr *FrameReader) fill(n int) error {
	if fr.w-fr.r >= n {
		return nil
	}
	buf := fr.rb.b
	if fr.r+n > len(buf) {
		fr.w = copy(buf, buf[fr.r:fr.w])
		fr.r = 0
	}
	for fr.w-fr.r < n {
		m, err := fr.src.Read(buf[fr.w:])
		fr.w += m
		if err == io.EOF {
			fr.eof = true
		}
		if err != nil {
			if fr.w-fr.r >= n {
				return nil // the source reports the error again on the next read
			}
			return err
		}
	}
	return nil
}

// Skip discards the body of the frame refused by the last FrameSizeError or BufferError,
// returning a copy of up to keep of its first bytes (for example, a header to answer). Without a
// refused frame it returns nothing. When a read of the source fails, the first bytes may be lost,
// but the stream stays framed: the next Next discards what is left of the body.
func (fr *FrameReader) Skip(keep int) ([]byte, error) {
	if fr.rb == nil {
		return nil, ErrReleased
	}
	keep = min(keep, fr.skip, len(fr.rb.b))
	if err := fr.fill(keep); err != nil {
		return nil, unexpected(err)
	}
	head := append([]byte(nil), fr.rb.b[fr.r:fr.r+keep]...)
	fr.r += keep
	fr.skip -= keep
	if err := fr.discard(); err != nil {
		return nil, err
	}
	return head, nil
}

// discard drops the rest of a refused body, reading it through the read buffer.
func (fr *FrameReader) discard() error {
	for fr.skip > 0 {
		if fr.r == fr.w {
			fr.r, fr.w = 0, 0
			m, err := fr.src.Read(fr.rb.b)
			fr.w = m
			if err == io.EOF {
				fr.eof = true
			}
			if m == 0 && err != nil {
				return unexpected(err)
			}
		}
		k := min(fr.skip, fr.w-fr.r)
		fr.r += k
		fr.skip -= k
	}
	return nil
}

// Ready reports whether a whole frame is buffered, so that Next returns without reading the
// source (and so without blocking).
func (fr *FrameReader) Ready() bool {
	switch {
	case fr.skip > 0:
		return false
	case fr.inBody:
		return fr.n <= len(fr.rb.b) && fr.w-fr.r >= fr.n
	case fr.w-fr.r < LengthSize:
		return false
	}
	return fr.w-fr.r-LengthSize >= int(binary.BigEndian.Uint32(fr.rb.b[fr.r:]))
}

// Unread returns how many bytes were received from the source but not yet returned in a body
// (or discarded).
func (fr *FrameReader) Unread() int {
	if fr.inBody && fr.n > len(fr.rb.b) {
		return fr.bigK
	}
	return fr.w - fr.r
}

// EOF reports whether the source has reported io.EOF (for a stream: its sending side finished).
func (fr *FrameReader) EOF() bool { return fr.eof }

// Buffered returns the bytes of memory the reader holds: its read buffer and its large-body
// buffer (nothing after Release).
func (fr *FrameReader) Buffered() int {
	if fr.rb == nil {
		return 0
	}
	return len(fr.rb.b) + cap(fr.big)
}

// Shrink lets go of the large-body buffer when its capacity exceeds keep bytes, telling the
// BufferBudget, so that one large frame does not pin its size for the connection's lifetime. It
// keeps the buffer while a large body is being read into it. A body returned earlier stays valid
// (the buffer is no longer reused). Shrink reports whether it let go.
func (fr *FrameReader) Shrink(keep int) bool {
	if cap(fr.big) <= keep || fr.inBody && fr.n > len(fr.rb.b) {
		return false
	}
	if fr.budget != nil {
		fr.budget.Shrink(cap(fr.big))
	}
	fr.big = nil
	return true
}

// Release lets go of the reader's buffers (Shrink(0)), returning a pooled read buffer to its pool.
// Bodies returned earlier are invalid afterwards, and the reader answers ErrReleased. Calling it
// again does nothing.
func (fr *FrameReader) Release() {
	if fr.rb == nil {
		return
	}
	if fr.big != nil {
		fr.inBody = false
		fr.Shrink(0)
	}
	if fr.rb.pool != nil {
		fr.rb.pool.pool.Put(fr.rb)
	}
	fr.rb = nil
	fr.r, fr.w = 0, 0
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
