package wire

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// loopReader serves a stream again and again, at most chunk bytes per Read, as a socket or a QUIC
// stream would.
type loopReader struct {
	data  []byte
	off   int
	chunk int
}

func (l *loopReader) Read(p []byte) (int, error) {
	if l.off == len(l.data) {
		l.off = 0
	}
	n := copy(p[:min(len(p), l.chunk)], l.data[l.off:])
	l.off += n
	return n, nil
}

type nexter interface{ Next() ([]byte, error) }

// BenchmarkFrameReader measures FrameReader side by side with the three readers it replaced
// (legacy_test.go), each configured as its user configures it: "fibp" (a connection's reader,
// 64 KiB buffer of its own; TCP-sized reads), "listener" and "client" (a Rift stream's reader
// with a pooled 32 KiB or 16 KiB buffer; QUIC-sized reads), over streams of frames of one size.
// The "stream" cases make a reader per frame (one call per stream), the pooled readers' common
// case. Compare old/… with new/… of the same user and size.
func BenchmarkFrameReader(b *testing.B) {
	maxFor := func(first byte) int { return 1 << 20 }
	listenerPool, clientPool := NewBufferPool(32<<10), NewBufferPool(16<<10)
	users := []struct {
		name  string
		chunk int
		old   func(io.Reader) (nexter, func())
		new   func(io.Reader) (nexter, func())
	}{
		{"fibp", 64 << 10,
			func(r io.Reader) (nexter, func()) { return newBufioFrameReader(r, 1, 1<<20), func() {} },
			func(r io.Reader) (nexter, func()) { fr := NewFrameReader(r, 1, 1<<20); return fr, fr.Release }},
		{"listener", 1200,
			func(r io.Reader) (nexter, func()) {
				fr := newListenerFrameReader(r, 1, 1<<20, maxFor)
				return fr, fr.release
			},
			func(r io.Reader) (nexter, func()) {
				fr := NewPooledFrameReader(r, 1, 1<<20, listenerPool)
				fr.SetMaxFor(maxFor)
				return fr, fr.Release
			}},
		{"client", 1200,
			func(r io.Reader) (nexter, func()) { fr := newClientFrameReader(r, 1, 1<<20); return fr, fr.release },
			func(r io.Reader) (nexter, func()) {
				fr := NewPooledFrameReader(r, 1, 1<<20, clientPool)
				return fr, fr.Release
			}},
	}
	for _, u := range users {
		for _, size := range []int{64, 1 << 10, 16 << 10, 256 << 10} {
			var stream []byte
			for range max(1, (1<<20)/size) {
				stream = append(stream, frames(bytes.Repeat([]byte{1}, size))...)
			}
			for _, side := range []struct {
				name string
				make func(io.Reader) (nexter, func())
			}{{"old", u.old}, {"new", u.new}} {
				b.Run(fmt.Sprintf("%s/%s/%dB", side.name, u.name, size), func(b *testing.B) {
					fr, release := side.make(&loopReader{data: stream, chunk: u.chunk})
					defer release()
					b.SetBytes(int64(size + LengthSize))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := fr.Next(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
		if u.name == "fibp" {
			continue
		}
		one := frames(bytes.Repeat([]byte{1}, 100))
		for _, side := range []struct {
			name string
			make func(io.Reader) (nexter, func())
		}{{"old", u.old}, {"new", u.new}} {
			b.Run(fmt.Sprintf("%s/%s/stream", side.name, u.name), func(b *testing.B) {
				src := bytes.NewReader(one)
				b.ReportAllocs()
				for b.Loop() {
					src.Reset(one)
					fr, release := side.make(src)
					if _, err := fr.Next(); err != nil {
						b.Fatal(err)
					}
					release()
				}
			})
		}
	}
}
