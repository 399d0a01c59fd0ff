package wire

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
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
	for _, u := range benchUsers() {
		for _, size := range benchSizes {
			stream := benchStream(size)
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

// BenchmarkFrameReaderPaired runs the former reader and FrameReader of each user and size in
// alternating blocks of frames within one benchmark, so that both see the same machine load
// (this machine is shared), and reports each side's ns/frame and their ratio: new/old below 1
// means FrameReader is faster. The ratio is the median of the blocks' ratios.
func BenchmarkFrameReaderPaired(b *testing.B) {
	for _, u := range benchUsers() {
		for _, size := range benchSizes {
			stream := benchStream(size)
			block := max(1, (256<<10)/size) // frames per block: about 256 KiB
			b.Run(fmt.Sprintf("%s/%dB", u.name, size), func(b *testing.B) {
				oldR, oldRelease := u.old(&loopReader{data: stream, chunk: u.chunk})
				newR, newRelease := u.new(&loopReader{data: stream, chunk: u.chunk})
				defer oldRelease()
				defer newRelease()
				run := func(fr nexter) time.Duration {
					start := time.Now()
					for range block {
						if _, err := fr.Next(); err != nil {
							b.Fatal(err)
						}
					}
					return time.Since(start)
				}
				var oldT, newT time.Duration
				var ratios []float64
				for b.Loop() {
					o, n := run(oldR), run(newR)
					oldT, newT = oldT+o, newT+n
					ratios = append(ratios, float64(n)/float64(o))
				}
				slices.Sort(ratios)
				frames := float64(b.N * block)
				b.ReportMetric(float64(oldT.Nanoseconds())/frames, "old-ns/frame")
				b.ReportMetric(float64(newT.Nanoseconds())/frames, "new-ns/frame")
				b.ReportMetric(ratios[len(ratios)/2], "new/old")
			})
		}
		if u.name != "fibp" {
			b.Run(u.name+"/stream", func(b *testing.B) { pairedStreams(b, u) })
		}
	}
}

// pairedStreams is BenchmarkFrameReaderPaired for a reader made per 100-byte frame: a stream per
// call, the pooled readers' common case.
func pairedStreams(b *testing.B, u benchUser) {
	one := frames(bytes.Repeat([]byte{1}, 100))
	src := bytes.NewReader(one)
	run := func(open func(io.Reader) (nexter, func())) time.Duration {
		start := time.Now()
		for range 100 {
			src.Reset(one)
			fr, release := open(src)
			if _, err := fr.Next(); err != nil {
				b.Fatal(err)
			}
			release()
		}
		return time.Since(start)
	}
	var oldT, newT time.Duration
	var ratios []float64
	for b.Loop() {
		o, n := run(u.old), run(u.new)
		oldT, newT = oldT+o, newT+n
		ratios = append(ratios, float64(n)/float64(o))
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(oldT.Nanoseconds())/float64(b.N*100), "old-ns/frame")
	b.ReportMetric(float64(newT.Nanoseconds())/float64(b.N*100), "new-ns/frame")
	b.ReportMetric(ratios[len(ratios)/2], "new/old")
}

var benchSizes = []int{64, 1 << 10, 16 << 10, 256 << 10}

// benchStream is about 1 MiB of frames of size bytes.
func benchStream(size int) []byte {
	var stream []byte
	for range max(1, (1<<20)/size) {
		stream = append(stream, frames(bytes.Repeat([]byte{1}, size))...)
	}
	return stream
}

type benchUser struct {
	name  string
	chunk int // bytes per Read of the source
	old   func(io.Reader) (nexter, func())
	new   func(io.Reader) (nexter, func())
}

// benchUsers are the three former readers' users, each side configured as its user configures it.
func benchUsers() []benchUser {
	maxFor := func(first byte) int { return 1 << 20 }
	listenerPool, clientPool := NewBufferPool(32<<10), NewBufferPool(16<<10)
	return []benchUser{
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
}
