package rift

import (
	"io"

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

var callBufs = wire.NewBufferPool(callBufSize)

// newCallReader returns a reader with the protocol's limits and a pooled buffer; the caller must
// call Release. A read error such as an expired deadline loses nothing: the next call to Next
// resumes the frame.
func newCallReader(src io.Reader) *wire.FrameReader {
	return wire.NewPooledFrameReader(src, riftproto.MinFrameSize, riftproto.MaxFrameSize, callBufs)
}

// newReaderSize returns a reader with the protocol's limits and a buffer of its own.
func newReaderSize(src io.Reader, size int) *wire.FrameReader {
	return wire.NewFrameReaderSize(src, riftproto.MinFrameSize, riftproto.MaxFrameSize, size)
}
