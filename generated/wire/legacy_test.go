package wire

import (
	"bufio"
	"encoding/binary"
	"io"
	"sync"
)

// The three frame readers that FrameReader replaced, kept verbatim but for their names and the
// protocol constants, as benchmark baselines only: BenchmarkFrameReader and
// BenchmarkFrameReaderPaired measure FrameReader against them side by side. (FuzzFrameReader
// checks FrameReader against frameModel, a twin of the framing rules, not against these.)

// bufioFrameReader is the former wire.FrameReader (FIBP, the queue log's snapshots).
type bufioFrameReader struct {
	br       *bufio.Reader
	min, max int
	maxFor   func(first byte) int
	pending  int
	big      []byte
}

func newBufioFrameReader(r io.Reader, min, max int) *bufioFrameReader {
	return &bufioFrameReader{br: bufio.NewReaderSize(r, 64<<10), min: min, max: max}
}

func (fr *bufioFrameReader) Next() ([]byte, error) {
	if fr.pending > 0 {
		fr.br.Discard(fr.pending)
		fr.pending = 0
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(fr.br, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(lenBuf[:]))
	if n < fr.min || n > fr.max {
		return nil, &FrameSizeError{Length: n, Min: fr.min, Max: fr.max}
	}
	if fr.maxFor != nil && n > 0 {
		first, err := fr.br.Peek(1)
		if err != nil {
			return nil, unexpected(err)
		}
		if limit := fr.maxFor(first[0]); n > limit {
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
		fr.big = make([]byte, n)
	}
	body := fr.big[:n:n]
	if _, err := io.ReadFull(fr.br, body); err != nil {
		return nil, unexpected(err)
	}
	return body, nil
}

// listenerFrameReader is the former Rift listener's reader (a pooled 32 KiB buffer).
type listenerFrameReader struct {
	src      io.Reader
	bufp     *[]byte
	buf      []byte
	r, w     int
	big      []byte
	min, max int
	maxFor   func(first byte) int
}

var legacyListenerBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func newListenerFrameReader(src io.Reader, min, max int, maxFor func(byte) int) *listenerFrameReader {
	bp := legacyListenerBufs.Get().(*[]byte)
	return &listenerFrameReader{src: src, bufp: bp, buf: *bp, min: min, max: max, maxFor: maxFor}
}

func (f *listenerFrameReader) release() {
	if f.bufp != nil {
		legacyListenerBufs.Put(f.bufp)
		f.bufp, f.buf, f.big = nil, nil, nil
	}
}

func (f *listenerFrameReader) fill(n int) error {
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
				return nil
			}
			return err
		}
	}
	return nil
}

func (f *listenerFrameReader) Next() ([]byte, error) {
	if err := f.fill(4); err != nil {
		if err == io.EOF && f.w == f.r {
			return nil, io.EOF
		}
		return nil, unexpected(err)
	}
	n := int(binary.BigEndian.Uint32(f.buf[f.r:]))
	f.r += 4
	if n < f.min || n > f.max {
		return nil, &FrameSizeError{Length: n, Min: f.min, Max: f.max}
	}
	if err := f.fill(1); err != nil {
		return nil, unexpected(err)
	}
	if limit := f.maxFor(f.buf[f.r]); n > limit {
		return nil, &FrameSizeError{Length: n, Min: f.min, Max: limit}
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

// clientFrameReader is the former Rift client's reader (resumable after a failed read).
type clientFrameReader struct {
	src        io.Reader
	bufp       *[]byte
	buf        []byte
	r, w       int
	big        []byte
	bigN, bigK int
	eof        bool
	min, max   int
}

var legacyCallBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

func newClientFrameReader(src io.Reader, min, max int) *clientFrameReader {
	bp := legacyCallBufs.Get().(*[]byte)
	return &clientFrameReader{src: src, bufp: bp, buf: *bp, min: min, max: max}
}

func (f *clientFrameReader) release() {
	if f.bufp != nil {
		legacyCallBufs.Put(f.bufp)
		f.bufp, f.buf, f.big = nil, nil, nil
	}
}

func (f *clientFrameReader) fill(n int) error {
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
				return nil
			}
			return err
		}
	}
	return nil
}

func (f *clientFrameReader) Next() ([]byte, error) {
	if f.bigN > 0 {
		return f.readBig()
	}
	if err := f.fill(4); err != nil {
		if err == io.EOF && f.w == f.r {
			return nil, io.EOF
		}
		return nil, unexpected(err)
	}
	n := int(binary.BigEndian.Uint32(f.buf[f.r:]))
	if n < f.min || n > f.max {
		f.r += 4
		return nil, &FrameSizeError{Length: n, Min: f.min, Max: f.max}
	}
	if 4+n <= len(f.buf) {
		if err := f.fill(4 + n); err != nil {
			return nil, unexpected(err)
		}
		start := f.r + 4
		f.r = start + n
		return f.buf[start:f.r:f.r], nil
	}
	f.r += 4
	if cap(f.big) < n {
		f.big = make([]byte, n)
	}
	f.bigN = n
	f.bigK = copy(f.big[:n], f.buf[f.r:f.w])
	f.r, f.w = 0, 0
	return f.readBig()
}

func (f *clientFrameReader) readBig() ([]byte, error) {
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
