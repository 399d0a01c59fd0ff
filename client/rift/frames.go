package rift

import (
	"encoding/binary"
	"io"
	"sync"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
)

// Read buffer sizes: single calls take a pooled buffer for their (usually one, small) answer; a
// subscription keeps a larger one for its stream of deliveries; frames larger than the buffer
// are read into a buffer of their own.
const (
	callBufSize = 16 << 10
	subBufSize  = 64 << 10
)

var callBufs = sync.Pool{New: func() any { b := make([]byte, callBufSize); return &b }}

// frameReader reads length-prefixed frames (the protocol's limits, wire.FrameReader's errors
// and aliasing rules). Next's body is valid until the next call to Next or release. A read error
// such as an expired deadline loses nothing: the next call to Next resumes the frame.
type frameReader struct {
	src  io.Reader
	bufp *[]byte // pooled buffer, returned by release
	buf  []byte
	r, w int // unread bytes are buf[r:w]
	big  []byte
	bigN int  // length of the large frame being read into big, 0 when none
	bigK int  // bytes of it read so far
	eof  bool // src reported io.EOF: the stream's receiving half is finished
}

// newCallReader returns a reader with a pooled buffer; the caller must call release.
func newCallReader(src io.Reader) *frameReader {
	bp := callBufs.Get().(*[]byte)
	return &frameReader{src: src, bufp: bp, buf: *bp}
}

// newReaderSize returns a reader with a buffer of its own.
func newReaderSize(src io.Reader, size int) *frameReader {
	return &frameReader{src: src, buf: make([]byte, size)}
}

// release returns a pooled buffer; the reader must not be used afterwards.
func (f *frameReader) release() {
	if f.bufp != nil {
		callBufs.Put(f.bufp)
		f.bufp, f.buf, f.big = nil, nil, nil
	}
}

// fill makes at least n bytes (n ≤ len(buf)) available in buf[r:w].
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
		if err == io.EOF {
			f.eof = true
		}
		if err != nil {
			if f.w-f.r >= n {
				return nil // the error comes back on the next read
			}
			return err
		}
	}
	return nil
}

// hasFrame reports whether a whole frame is buffered, so that Next returns without reading.
func (f *frameReader) hasFrame() bool {
	if f.bigN > 0 || f.w-f.r < riftproto.LengthSize {
		return false
	}
	return f.w-f.r >= riftproto.LengthSize+int(binary.BigEndian.Uint32(f.buf[f.r:]))
}

// Next returns the next frame body: io.EOF at a clean end of stream, io.ErrUnexpectedEOF inside
// a frame, a *wire.FrameSizeError for a length outside the protocol's limits.
func (f *frameReader) Next() ([]byte, error) {
	if f.bigN > 0 {
		return f.readBig()
	}
	if err := f.fill(riftproto.LengthSize); err != nil {
		if err == io.EOF && f.w == f.r {
			return nil, io.EOF
		}
		return nil, unexpected(err)
	}
	n := int(binary.BigEndian.Uint32(f.buf[f.r:]))
	if n < riftproto.MinFrameSize || n > riftproto.MaxFrameSize {
		f.r += riftproto.LengthSize
		return nil, &wire.FrameSizeError{Length: n, Min: riftproto.MinFrameSize, Max: riftproto.MaxFrameSize}
	}
	if riftproto.LengthSize+n <= len(f.buf) {
		if err := f.fill(riftproto.LengthSize + n); err != nil {
			return nil, unexpected(err) // nothing consumed: the next call starts this frame again
		}
		start := f.r + riftproto.LengthSize
		f.r = start + n
		return f.buf[start:f.r:f.r], nil
	}
	// Larger than the buffer, which therefore holds only (part of) this frame.
	f.r += riftproto.LengthSize
	if cap(f.big) < n {
		f.big = make([]byte, n)
	}
	f.bigN = n
	f.bigK = copy(f.big[:n], f.buf[f.r:f.w])
	f.r, f.w = 0, 0
	return f.readBig()
}

// readBig reads the rest of the large frame started in big.
func (f *frameReader) readBig() ([]byte, error) {
	for f.bigK < f.bigN {
		m, err := f.src.Read(f.big[f.bigK:f.bigN])
		f.bigK += m
		if err == io.EOF {
			f.eof = true
		}
		if err != nil && f.bigK < f.bigN {
			return nil, unexpected(err)
		}
	}
	n := f.bigN
	f.bigN, f.bigK = 0, 0
	return f.big[:n:n], nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
