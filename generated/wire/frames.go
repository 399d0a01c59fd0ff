package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// FrameSizeError reports a length prefix outside the accepted range. The body has not been read;
// FrameReader.Skip discards it so that the connection can continue.
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
// read; FrameReader.Skip discards it so that the connection can continue.
type BufferError struct {
	Length int   // the body's length
	Err    error // the budget's refusal
}

func (e *BufferError) Error() string {
	return fmt.Sprintf("no memory for a %d-byte frame: %v", e.Length, e.Err)
}

func (e *BufferError) Unwrap() error { return e.Err }

// FrameReader reads length-prefixed frames: [u32 big-endian length][length bytes of body].
//
// The body returned by Next is valid until the next call to Next or Skip: small bodies alias the
// reader's internal buffer (no copy); larger ones are read into a buffer the reader reuses.
type FrameReader struct {
	br      *bufio.Reader
	min     int
	max     int
	maxFor  func(first byte) int
	pending int // bytes of the last small body still to discard from br
	big     []byte
	skip    int // body length of the frame refused by the last FrameSizeError or BufferError
	budget  BufferBudget
}

// NewFrameReader returns a reader accepting bodies of min..max bytes.
func NewFrameReader(r io.Reader, min, max int) *FrameReader {
	return &FrameReader{br: bufio.NewReaderSize(r, 64<<10), min: min, max: max}
}

// SetBudget has b approve the buffer for bodies larger than the reader's internal buffer (whose
// own size, Buffered before the first large frame, is not asked for).
func (fr *FrameReader) SetBudget(b BufferBudget) { fr.budget = b }

// SetMax changes the largest accepted body length.
func (fr *FrameReader) SetMax(max int) { fr.max = max }

// SetMaxFor installs a per-frame limit chosen by the body's first byte (an opcode), checked
// before the body is read. It is consulted only for bodies within the reader's own range.
func (fr *FrameReader) SetMaxFor(f func(first byte) int) { fr.maxFor = f }

// Next reads the next frame body. It returns io.EOF at a clean end of stream, io.ErrUnexpectedEOF
// when the stream ends inside a frame, and a *FrameSizeError for a refused length.
func (fr *FrameReader) Next() ([]byte, error) {
	if fr.pending > 0 {
		fr.br.Discard(fr.pending) // the bytes are buffered: Discard cannot fail
		fr.pending = 0
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(fr.br, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(lenBuf[:]))
	if n < fr.min || n > fr.max {
		fr.skip = n
		return nil, &FrameSizeError{Length: n, Min: fr.min, Max: fr.max}
	}
	if fr.maxFor != nil && n > 0 {
		first, err := fr.br.Peek(1)
		if err != nil {
			return nil, unexpected(err)
		}
		if limit := fr.maxFor(first[0]); n > limit {
			fr.skip = n
			return nil, &FrameSizeError{Length: n, Min: fr.min, Max: limit}
		}
	}
	if n <= fr.br.Size() {
		body, err := fr.br.Peek(n)
		if err != nil {
			return nil, unexpected(err)
		}
		fr.pending = n
		return body[:n:n], nil
	}
	if cap(fr.big) < n {
		if fr.budget != nil {
			if err := fr.budget.Grow(n - cap(fr.big)); err != nil {
				fr.skip = n
				return nil, &BufferError{Length: n, Err: err}
			}
		}
		fr.big = make([]byte, n)
	}
	body := fr.big[:n:n]
	if _, err := io.ReadFull(fr.br, body); err != nil {
		return nil, unexpected(err)
	}
	return body, nil
}

// Shrink lets go of the buffer that holds bodies larger than the internal buffer when its capacity
// exceeds keep bytes, so that one large frame does not pin its size for the connection's lifetime.
// A body returned earlier stays valid (it is no longer reused). Shrink reports whether it let go.
func (fr *FrameReader) Shrink(keep int) bool {
	if cap(fr.big) > keep {
		if fr.budget != nil {
			fr.budget.Shrink(cap(fr.big))
		}
		fr.big = nil
		return true
	}
	return false
}

// Buffered returns the bytes of memory the reader holds: its read buffer and its large-body buffer.
func (fr *FrameReader) Buffered() int { return fr.br.Size() + cap(fr.big) }

// Skip discards the body of the frame refused by the last FrameSizeError or BufferError, returning up to keep
// of its first bytes (for example, a header to answer).
func (fr *FrameReader) Skip(keep int) ([]byte, error) {
	n := fr.skip
	fr.skip = 0
	keep = min(keep, n)
	head := make([]byte, keep)
	if _, err := io.ReadFull(fr.br, head); err != nil {
		return nil, unexpected(err)
	}
	if _, err := fr.br.Discard(n - keep); err != nil {
		return nil, unexpected(err)
	}
	return head, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
