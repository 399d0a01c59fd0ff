package listener

import (
	"io"
	"strings"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/membudget"
)

// readBufSize is the size of a stream's read buffer; larger frames are read into a buffer of
// their own.
const readBufSize = 32 << 10

// readBufs lends read buffers: every operation stream needs one, most only for a single small
// frame, and allocating (and zeroing) a fresh buffer per stream showed up in every profile.
var readBufs = wire.NewBufferPool(readBufSize)

// newFrameReader returns a reader of src with the protocol's limits (AUTH's own included),
// reading into a buffer from readBufs; Release returns it.
func newFrameReader(src io.Reader) *wire.FrameReader {
	fr := wire.NewPooledFrameReader(src, riftproto.MinFrameSize, riftproto.MaxFrameSize, readBufs)
	fr.SetMaxFor(maxFor)
	return fr
}

// pacedReader applies the read deadlines to a stream: the first frame must arrive whole before
// firstDeadline; afterwards a stream may idle between frames for as long as it likes, but once a
// frame has started the rest must arrive within partial.
//
// It knows whether a frame has started by counting: bytes handed to the frame reader's buffer
// versus bytes of the frames the reader has returned (consumed, kept up to date by frames.next).
type pacedReader struct {
	s         *quic.Stream
	partial   time.Duration
	first     bool // the first frame is not complete yet: the fixed first deadline applies
	delivered int64
	consumed  int64
	idle      bool // the current deadline is "none"
}

func (r *pacedReader) Read(p []byte) (int, error) {
	switch {
	case r.first:
	case r.delivered > r.consumed:
		r.s.SetReadDeadline(time.Now().Add(r.partial))
		r.idle = false
	case !r.idle:
		r.s.SetReadDeadline(time.Time{})
		r.idle = true
	}
	n, err := r.s.Read(p)
	r.delivered += int64(n)
	return n, err
}

// frames reads the frames of one operation stream. Its buffers are accounted to the
// connection's memory account: the read buffer while the stream holds it, the large-body buffer
// through the frame reader's budget (a refusal is a *wire.BufferError from next). Frames that fit
// the read buffer cost no accounting.
type frames struct {
	fr   *wire.FrameReader
	pr   pacedReader
	acct *membudget.Account // holds readBufSize for fr's read buffer; nil once released
}

// newFrames reserves the stream's read buffer on acct and returns its reader, or the
// reservation's *membudget.FullError.
func newFrames(s *quic.Stream, acct *membudget.Account, firstDeadline time.Time, partial time.Duration) (*frames, error) {
	if err := acct.Reserve(readBufSize); err != nil {
		return nil, err
	}
	s.SetReadDeadline(firstDeadline)
	f := &frames{pr: pacedReader{s: s, partial: partial, first: true}, acct: acct}
	f.fr = newFrameReader(&f.pr)
	if acct != nil { // not a typed nil: a nil Account refuses nothing anyway
		f.fr.SetBudget(acct)
	}
	return f, nil
}

// release returns the read buffer and its reservation; bodies returned by next are invalid
// afterwards. Calling it again does nothing.
func (f *frames) release() {
	f.fr.Release()
	f.acct.Release(readBufSize)
	f.acct = nil
}

// next returns the next frame's opcode and body (after the opcode byte). The body is valid until
// the next call.
func (f *frames) next() (riftproto.Opcode, []byte, error) {
	body, err := f.fr.Next()
	if err != nil {
		return 0, nil, err
	}
	f.pr.consumed += int64(riftproto.LengthSize + len(body))
	f.pr.first = false
	return riftproto.Opcode(body[0]), body[1:], nil
}

// writer sends frames on a stream, each write bounded by the blocked-write deadline.
type writer struct {
	s       *quic.Stream
	timeout time.Duration
	buf     []byte
}

// send writes fr as one frame.
func (w *writer) send(fr riftproto.Frame) error {
	if n := riftproto.LengthSize + riftproto.HeaderSize + fr.Size(); cap(w.buf) < n {
		w.buf = make([]byte, 0, n) // one allocation for an answer, not append's growth steps
	}
	w.buf = riftproto.AppendFrame(w.buf[:0], fr)
	return w.flush()
}

// flush writes w.buf and empties it.
func (w *writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	w.s.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.s.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// fail answers ERROR and terminates the stream: the send side is finished and further input is
// refused.
func (w *writer) fail(code riftproto.ErrorCode, msg string) {
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	w.send(&riftproto.Error{Code: code, Message: strings.ToValidUTF8(msg, "")})
	w.s.Close()
	w.s.CancelRead(ResetCancelled)
}
