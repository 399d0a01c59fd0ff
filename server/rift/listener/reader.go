package listener

import (
	"encoding/binary"
	"io"
	"sync"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
)

// readBufSize is the size of a stream's read buffer; larger frames are read into a buffer of
// their own.
const readBufSize = 32 << 10

// readBufs recycles read buffers: every operation stream needs one, most only for a single small
// frame, and allocating (and zeroing) a fresh buffer per stream showed up in every profile.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// frameReader reads length-prefixed frames like wire.FrameReader (same limits, errors and
// aliasing rules), from a pooled buffer that release returns.
//
// Next returns io.EOF at a clean end of stream, io.ErrUnexpectedEOF when the stream ends inside
// a frame, and a *wire.FrameSizeError for a refused length. The body is valid until the next
// call to Next or release.
type frameReader struct {
	src    io.Reader
	bufp   *[]byte
	buf    []byte
	r, w   int // unread bytes are buf[r:w]
	big    []byte
	maxFor func(first byte) int
}

func newFrameReader(src io.Reader) *frameReader {
	bp := readBufs.Get().(*[]byte)
	return &frameReader{src: src, bufp: bp, buf: *bp, maxFor: maxFor}
}

// release returns the buffer to the pool; the reader must not be used afterwards.
func (f *frameReader) release() {
	if f.bufp != nil {
		readBufs.Put(f.bufp)
		f.bufp, f.buf, f.big = nil, nil, nil
	}
}

// buffered returns how many bytes were received but not yet returned as frames.
func (f *frameReader) buffered() int { return f.w - f.r }

// fill makes at least n bytes available in buf[r:w] (n ≤ len(buf)).
func (f *frameReader) fill(n int) error {
	if f.w-f.r >= n {
		return nil
	}
	if f.r+n > len(f.buf) {
		f.w = copy(f.buf, f.buf[f.r:f.w])
		f.r = 0
	}
	for f.w-f.r < n {
		m, err := f.src.Read(f.buf[f.w:])
		f.w += m
		if err != nil {
			if f.w-f.r >= n {
				return nil // the error comes back on the next read
			}
			return err
		}
	}
	return nil
}

func (f *frameReader) Next() ([]byte, error) {
	if err := f.fill(riftproto.LengthSize); err != nil {
		if err == io.EOF && f.w == f.r {
			return nil, io.EOF
		}
		return nil, unexpected(err)
	}
	n := int(binary.BigEndian.Uint32(f.buf[f.r:]))
	f.r += riftproto.LengthSize
	if n < riftproto.MinFrameSize || n > riftproto.MaxFrameSize {
		return nil, &wire.FrameSizeError{Length: n, Min: riftproto.MinFrameSize, Max: riftproto.MaxFrameSize}
	}
	if err := f.fill(1); err != nil {
		return nil, unexpected(err)
	}
	if limit := f.maxFor(f.buf[f.r]); n > limit {
		return nil, &wire.FrameSizeError{Length: n, Min: riftproto.MinFrameSize, Max: limit}
	}
	if n <= len(f.buf) {
		if err := f.fill(n); err != nil {
			return nil, unexpected(err)
		}
		body := f.buf[f.r : f.r+n : f.r+n]
		f.r += n
		return body, nil
	}
	if cap(f.big) < n {
		f.big = make([]byte, n)
	}
	body := f.big[:n:n]
	k := copy(body, f.buf[f.r:f.w])
	f.r, f.w = 0, 0
	if _, err := io.ReadFull(f.src, body[k:]); err != nil {
		return nil, unexpected(err)
	}
	return body, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
