package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
)

// frameEvent is one outcome of reading a frame: a body, or how reading failed.
type frameEvent struct {
	body []byte
	err  string // "", "EOF", "unexpected EOF", "size ≤N", "buffer"
	head []byte // a refused frame's first bytes, as Skip returns them
}

func (e frameEvent) String() string {
	if e.err != "" {
		return fmt.Sprintf("%s (head %x)", e.err, e.head)
	}
	return fmt.Sprintf("%d-byte body %.16x", len(e.body), e.body)
}

// frameModel is the twin the fuzz target checks FrameReader against: the framing rules read
// straight off a byte slice, with the budget's one decision (a large body is refused when its
// buffer would exceed the limit).
type frameModel struct {
	bufSize, min, max, limit int
	maxFor                   func(byte) int
	keep                     int // bytes of a refused body Skip returns
}

func (m frameModel) events(d []byte) []frameEvent {
	var out []frameEvent
	bigCap := 0
	refuse := func(err string, n int) bool {
		if len(d) < n {
			out = append(out, frameEvent{err: err}, frameEvent{err: "unexpected EOF"})
			return false
		}
		out = append(out, frameEvent{err: err, head: d[:min(m.keep, n)]})
		d = d[n:]
		return true
	}
	for {
		if len(d) == 0 {
			return append(out, frameEvent{err: "EOF"})
		}
		if len(d) < LengthSize {
			return append(out, frameEvent{err: "unexpected EOF"})
		}
		n := int(binary.BigEndian.Uint32(d))
		d = d[LengthSize:]
		if n < m.min || n > m.max {
			if !refuse(fmt.Sprintf("size ≤%d", m.max), n) {
				return out
			}
			continue
		}
		if m.maxFor != nil && n > 0 {
			if len(d) == 0 {
				return append(out, frameEvent{err: "unexpected EOF"})
			}
			if limit := m.maxFor(d[0]); n > limit {
				if !refuse(fmt.Sprintf("size ≤%d", limit), n) {
					return out
				}
				continue
			}
		}
		if n > m.bufSize && n > bigCap {
			if n > m.limit {
				if !refuse("buffer", n) {
					return out
				}
				continue
			}
			bigCap = n
		}
		if len(d) < n {
			return append(out, frameEvent{err: "unexpected EOF"})
		}
		out = append(out, frameEvent{body: d[:n]})
		d = d[n:]
	}
}

// read runs a FrameReader over src to the end, retrying reads that failed with a deadline, and
// calling Skip on refused frames when skip is set.
func read(t *testing.T, fr *FrameReader, skip bool, keep int) []frameEvent {
	var out []frameEvent
	for {
		body, err := fr.Next()
		var size *FrameSizeError
		var buf *BufferError
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case err == nil:
			out = append(out, frameEvent{body: bytes.Clone(body)})
			continue
		case err == io.EOF:
			return append(out, frameEvent{err: "EOF"})
		case err == io.ErrUnexpectedEOF:
			return append(out, frameEvent{err: "unexpected EOF"})
		case errors.As(err, &size):
			out = append(out, frameEvent{err: fmt.Sprintf("size ≤%d", size.Max)})
		case errors.As(err, &buf):
			out = append(out, frameEvent{err: "buffer"})
		default:
			t.Fatalf("unexpected error %v", err)
		}
		if !skip {
			out[len(out)-1].head = nil
			continue
		}
		head, err := fr.Skip(keep)
		switch {
		case err == nil:
			out[len(out)-1].head = head
		case errors.Is(err, os.ErrDeadlineExceeded): // the head is lost; Next discards the rest
			out[len(out)-1].head = nil
		case err == io.ErrUnexpectedEOF:
			return append(out, frameEvent{err: "unexpected EOF"})
		default:
			t.Fatalf("Skip: %v", err)
		}
	}
}

// FuzzFrameReader reads arbitrary bytes, delivered in chunks of any size with reads that fail
// (a deadline) anywhere, through read buffers of many sizes, with and without a per-first-byte
// limit and a budget: the frames and errors must be the twin's, the budget must hold exactly the
// large-body buffer, and nothing may panic, hang or allocate past the reader's bounds.
func FuzzFrameReader(f *testing.F) {
	f.Add(frames([]byte("hello"), bytes.Repeat([]byte{1}, 300)), uint8(3), uint8(2), uint8(0x83))
	f.Add(frames(bytes.Repeat([]byte{200}, 900), []byte{0xff}, nil), uint8(0), uint8(0), uint8(0x01))
	f.Add([]byte{0, 0, 0, 9, 1, 2}, uint8(1), uint8(7), uint8(0x10))
	f.Add(binary.BigEndian.AppendUint32(nil, 1<<31), uint8(4), uint8(1), uint8(0x80))
	f.Fuzz(func(t *testing.T, data []byte, chunk, bufSel, flags uint8) {
		m := frameModel{bufSize: minReadBuffer + 8*int(bufSel&63), min: 1, max: 4 << 10, limit: int(bufSel) * 16, keep: 3}
		if flags&1 != 0 {
			m.maxFor = func(first byte) int { return 4 * int(first) }
		}
		fails := map[int]bool{}
		if every := int(flags>>1) & 31; every > 0 {
			for o := 0; o <= len(data); o += every {
				fails[o] = true
			}
		}
		src := &chunkReader{data: data, chunk: 1 + int(chunk), fails: fails}
		fr := NewFrameReaderSize(src, m.min, m.max, m.bufSize)
		b := &limitBudget{limit: m.limit}
		fr.SetBudget(b)
		if m.maxFor != nil {
			fr.SetMaxFor(m.maxFor)
		}
		skip := flags&0x80 != 0
		got := read(t, fr, skip, m.keep)
		want := m.events(data)
		if !skip {
			for i := range want {
				want[i].head = nil
			}
		}
		for i := range min(len(got), len(want)) {
			if got[i].head == nil && want[i].err != "" { // a head lost to a failed read
				want[i].head = nil
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read\n%v\nwant\n%v", got, want)
		}
		if b.used != cap(fr.big) || cap(fr.big) > m.max {
			t.Fatalf("budget holds %d, large-body buffer %d (max %d)", b.used, cap(fr.big), m.max)
		}
	})
}
