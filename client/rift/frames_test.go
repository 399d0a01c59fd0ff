package rift

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
)

// chunkReader hands out its data a few bytes at a time and fails with a deadline error at the
// given offsets (once each), as a QUIC stream whose read deadline passed would.
type chunkReader struct {
	data  []byte
	chunk int
	fails map[int]bool
	off   int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.fails[c.off] {
		delete(c.fails, c.off)
		return 0, os.ErrDeadlineExceeded
	}
	if c.off == len(c.data) {
		return 0, io.EOF
	}
	n := min(len(p), c.chunk, len(c.data)-c.off)
	for o := c.off + 1; o < c.off+n; o++ {
		if c.fails[o] {
			n = o - c.off
			break
		}
	}
	copy(p, c.data[c.off:c.off+n])
	c.off += n
	return n, nil
}

func rawFrame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// Frames of every size come out whole whatever the chunking, across buffer compactions and the
// large-frame path; a failed read in the middle of any of them loses nothing.
func TestFrameReaderResumesAfterErrors(t *testing.T) {
	var bodies [][]byte
	var data []byte
	for i, n := range []int{1, 7, 100, 15 << 10, 16<<10 - 4, 16 << 10, 40 << 10, 3, 70 << 10, 1} {
		b := bytes.Repeat([]byte{byte(i + 1)}, n)
		bodies = append(bodies, b)
		data = append(data, rawFrame(b)...)
	}
	for _, chunk := range []int{1, 3, 1000, 1 << 20} {
		fails := map[int]bool{}
		for o := 0; o < len(data); o += 997 {
			fails[o] = true
		}
		src := &chunkReader{data: data, chunk: chunk, fails: fails}
		fr := newCallReader(src)
		for i := 0; i < len(bodies); {
			body, err := fr.Next()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if err != nil {
				t.Fatalf("chunk %d, frame %d: %v", chunk, i, err)
			}
			if !bytes.Equal(body, bodies[i]) {
				t.Fatalf("chunk %d, frame %d: %d bytes, want %d", chunk, i, len(body), len(bodies[i]))
			}
			i++
		}
		if _, err := fr.Next(); err != io.EOF || !fr.EOF() {
			t.Fatalf("chunk %d: at the end %v (eof %v), want io.EOF", chunk, err, fr.EOF())
		}
		fr.Release()
	}
}

func TestFrameReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"clean end", nil, io.EOF},
		{"end inside the length", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"end inside a small body", []byte{0, 0, 0, 5, 1}, io.ErrUnexpectedEOF},
		{"end inside a large body", append([]byte{0, 1, 0, 0}, make([]byte, 20<<10)...), io.ErrUnexpectedEOF},
		{"length zero", []byte{0, 0, 0, 0}, &wire.FrameSizeError{}},
		{"length too large", binary.BigEndian.AppendUint32(nil, riftproto.MaxFrameSize+1), &wire.FrameSizeError{}},
	} {
		fr := newReaderSize(&chunkReader{data: tc.data, chunk: 4096}, callBufSize)
		_, err := fr.Next()
		var size *wire.FrameSizeError
		if _, wantSize := tc.want.(*wire.FrameSizeError); wantSize && !errors.As(err, &size) || !wantSize && err != tc.want {
			t.Errorf("%s: %v, want %T %v", tc.name, err, tc.want, tc.want)
		}
	}
}
