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

// chunkReader hands out its data at most chunk bytes per Read and fails with a deadline error at
// the given offsets (once each), as a stream whose read deadline passed would.
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

// limitBudget is a BufferBudget with a limit that records what it holds.
type limitBudget struct {
	limit, used int
}

func (b *limitBudget) Grow(n int) error {
	if b.used+n > b.limit {
		return fmt.Errorf("%d bytes held, %d more asked, limit %d", b.used, n, b.limit)
	}
	b.used += n
	return nil
}

func (b *limitBudget) Shrink(n int) { b.used -= n }

var testPool = NewBufferPool(1 << 10)

// readers returns the ways a reader is made, each with a 1 KiB read buffer, so that bodies of
// more than 1 KiB take the large-body path.
func readers() map[string]func(io.Reader, int, int) *FrameReader {
	return map[string]func(io.Reader, int, int) *FrameReader{
		"own buffer": func(r io.Reader, lo, hi int) *FrameReader { return NewFrameReaderSize(r, lo, hi, 1<<10) },
		"pooled":     func(r io.Reader, lo, hi int) *FrameReader { return NewPooledFrameReader(r, lo, hi, testPool) },
	}
}

// Frames of every size come out whole whatever the chunking, across buffer compactions and the
// large-body path, and a failed read in the middle of any of them loses nothing: the next Next
// resumes the frame.
func TestFrameReaderResumesAfterErrors(t *testing.T) {
	var bodies [][]byte
	var data []byte
	for i, n := range []int{1, 7, 100, 1<<10 - 4, 1<<10 - 3, 1 << 10, 1<<10 + 1, 3, 70 << 10, 1} {
		b := bytes.Repeat([]byte{byte(i + 1)}, n)
		bodies = append(bodies, b)
		data = append(data, frames(b)...)
	}
	for name, newReader := range readers() {
		for _, chunk := range []int{1, 3, 1000, 1 << 20} {
			fails := map[int]bool{}
			for o := 0; o < len(data); o += 97 {
				fails[o] = true
			}
			fr := newReader(&chunkReader{data: data, chunk: chunk, fails: fails}, 1, 1<<20)
			for i := 0; i < len(bodies); {
				body, err := fr.Next()
				if errors.Is(err, os.ErrDeadlineExceeded) {
					continue
				}
				if err != nil || !bytes.Equal(body, bodies[i]) {
					t.Fatalf("%s, chunk %d, frame %d: %d bytes, %v; want %d bytes", name, chunk, i, len(body), err, len(bodies[i]))
				}
				i++
			}
			if _, err := fr.Next(); err != io.EOF || !fr.EOF() {
				t.Fatalf("%s, chunk %d: at the end %v (EOF %v), want io.EOF", name, chunk, err, fr.EOF())
			}
			fr.Release()
		}
	}
}

func TestFrameReaderErrors(t *testing.T) {
	maxFor := func(first byte) int { return int(first) + 2 } // opcode 1 allows 3 bytes
	for _, tc := range []struct {
		name    string
		data    []byte
		maxFor  bool
		want    error
		sizeMax int // for a *FrameSizeError: its Max
	}{
		{"clean end", nil, false, io.EOF, 0},
		{"end inside the length", []byte{0, 0, 1}, false, io.ErrUnexpectedEOF, 0},
		{"end before the first byte", []byte{0, 0, 0, 2}, true, io.ErrUnexpectedEOF, 0},
		{"end inside a body", []byte{0, 0, 0, 5, 4, 0}, false, io.ErrUnexpectedEOF, 0},
		{"end inside a large body", append([]byte{0, 0, 8, 0}, make([]byte, 1500)...), false, io.ErrUnexpectedEOF, 0},
		{"length zero", []byte{0, 0, 0, 0}, false, nil, 1 << 20},
		{"length above the maximum", binary.BigEndian.AppendUint32(nil, 1<<20+1), false, nil, 1 << 20},
		{"length above the first byte's limit", frames([]byte{1, 2, 3, 4}), true, nil, 3},
		{"first byte's limit ignored without SetMaxFor", frames([]byte{1, 2, 3, 4}), false, nil, 0},
	} {
		for name, newReader := range readers() {
			fr := newReader(&chunkReader{data: tc.data, chunk: 3}, 1, 1<<20)
			if tc.maxFor {
				fr.SetMaxFor(maxFor)
			}
			_, err := fr.Next()
			var size *FrameSizeError
			switch {
			case tc.want != nil && err != tc.want:
				t.Errorf("%s, %s: %v, want %v", tc.name, name, err, tc.want)
			case tc.want == nil && tc.sizeMax == 0 && err != nil:
				t.Errorf("%s, %s: %v, want a frame", tc.name, name, err)
			case tc.want == nil && tc.sizeMax != 0 && (!errors.As(err, &size) || size.Max != tc.sizeMax):
				t.Errorf("%s, %s: %v, want a frame size error with limit %d", tc.name, name, err, tc.sizeMax)
			}
			fr.Release()
		}
	}
}

// A refused frame leaves the stream framed: Skip returns its first bytes and discards the rest, and
// so does Next when Skip was not called.
func TestFrameReaderSkipsRefusedFrames(t *testing.T) {
	big := bytes.Repeat([]byte{9}, 5000) // larger than the read buffer: discarded in several reads
	stream := frames(big, []byte("one"), big, []byte("two"))
	for name, newReader := range readers() {
		fr := newReader(&chunkReader{data: stream, chunk: 700}, 1, 100)
		var size *FrameSizeError
		if _, err := fr.Next(); !errors.As(err, &size) || size.Length != len(big) {
			t.Fatalf("%s: %v, want a frame size error", name, err)
		}
		if head, err := fr.Skip(6); err != nil || !bytes.Equal(head, big[:6]) {
			t.Fatalf("%s: Skip = %v, %v", name, head, err)
		}
		if got, err := fr.Next(); err != nil || string(got) != "one" {
			t.Fatalf("%s: after Skip %q, %v", name, got, err)
		}
		if _, err := fr.Next(); !errors.As(err, &size) {
			t.Fatalf("%s: %v, want a frame size error", name, err)
		}
		if got, err := fr.Next(); err != nil || string(got) != "two" {
			t.Fatalf("%s: after a refusal without Skip %q, %v", name, got, err)
		}
		if head, err := fr.Skip(6); err != nil || len(head) != 0 {
			t.Fatalf("%s: Skip with nothing refused = %v, %v", name, head, err)
		}
		fr.Release()
	}
}

// The budget approves every large-body buffer before it is allocated and always holds exactly the
// buffer's capacity: through growth, a refusal (answered with a BufferError whose body Skip
// discards), a partly received large frame (which Shrink keeps), Shrink and Release.
func TestFrameReaderBudget(t *testing.T) {
	b := &limitBudget{limit: 10 << 10}
	small, mid, huge := []byte("hi"), bytes.Repeat([]byte{2}, 3000), bytes.Repeat([]byte{3}, 20<<10)
	stream := frames(small, mid, huge, mid, bytes.Repeat([]byte{4}, 8<<10))
	fails := map[int]bool{len(frames(small, mid, huge, mid)) + 2000: true} // inside the last frame
	fr := NewFrameReaderSize(&chunkReader{data: stream, chunk: 1000, fails: fails}, 1, 1<<20, 1<<10)
	fr.SetBudget(b)
	check := func(step string) {
		t.Helper()
		if b.used != cap(fr.big) || fr.Buffered() != 1<<10+cap(fr.big) {
			t.Fatalf("%s: budget holds %d, large-body buffer %d, Buffered %d", step, b.used, cap(fr.big), fr.Buffered())
		}
	}
	if body, err := fr.Next(); err != nil || !bytes.Equal(body, small) || b.used != 0 {
		t.Fatalf("small frame: %d bytes, %v, budget %d", len(body), err, b.used)
	}
	if body, err := fr.Next(); err != nil || !bytes.Equal(body, mid) {
		t.Fatalf("large frame: %d bytes, %v", len(body), err)
	}
	check("after a large frame")
	var be *BufferError
	if _, err := fr.Next(); !errors.As(err, &be) || be.Length != len(huge) {
		t.Fatalf("frame above the budget: %v, want a BufferError", err)
	}
	check("after a refusal")
	if head, err := fr.Skip(2); err != nil || !bytes.Equal(head, huge[:2]) {
		t.Fatalf("Skip = %v, %v", head, err)
	}
	if body, err := fr.Next(); err != nil || !bytes.Equal(body, mid) {
		t.Fatalf("after the refused frame: %d bytes, %v", len(body), err)
	}
	if !fr.Shrink(1<<10) || b.used != 0 {
		t.Fatalf("Shrink kept %d bytes", b.used)
	}
	if _, err := fr.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("inside the last frame: %v, want the source's deadline", err)
	}
	if fr.Shrink(0) {
		t.Fatal("Shrink let go of the buffer of a partly received frame")
	}
	check("partly received frame")
	if body, err := fr.Next(); err != nil || len(body) != 8<<10 || body[0] != 4 {
		t.Fatalf("resumed frame: %d bytes, %v", len(body), err)
	}
	check("after the resumed frame")
	fr.Release()
	if b.used != 0 {
		t.Fatalf("after Release the budget holds %d", b.used)
	}
	if _, err := fr.Next(); err != ErrReleased {
		t.Fatalf("Next after Release: %v", err)
	}
	fr.Release() // a second Release does nothing
}

// Ready says whether Next can return without reading; Unread counts what was received and not
// returned; EOF says whether the source finished.
func TestFrameReaderReadyUnreadEOF(t *testing.T) {
	stream := frames([]byte("abc"), []byte("de"))
	fr := NewFrameReaderSize(&chunkReader{data: stream, chunk: 100}, 1, 100, 64)
	if fr.Ready() || fr.Unread() != 0 || fr.EOF() {
		t.Fatal("a new reader has something")
	}
	if _, err := fr.Next(); err != nil { // reads the whole stream at once
		t.Fatal(err)
	}
	if got := fr.Unread(); got != len(stream)-7 {
		t.Fatalf("Unread = %d after the first frame, want %d", got, len(stream)-7)
	}
	if !fr.Ready() {
		t.Fatal("the second frame is buffered but not Ready")
	}
	if got, err := fr.Next(); err != nil || string(got) != "de" || fr.Ready() || fr.Unread() != 0 {
		t.Fatalf("second frame %q, %v; Ready %v, Unread %d", got, err, fr.Ready(), fr.Unread())
	}
	if fr.EOF() {
		t.Fatal("EOF before the source said so")
	}
	if _, err := fr.Next(); err != io.EOF || !fr.EOF() {
		t.Fatalf("at the end: %v, EOF %v", err, fr.EOF())
	}
}

// A pooled buffer goes back to its pool: a reader made after Release can get it again, and bodies
// it returns come from it.
func TestFrameReaderPoolReusesBuffers(t *testing.T) {
	pool := NewBufferPool(64)
	if pool.size != 64 || NewBufferPool(1).size != minReadBuffer {
		t.Fatal("pool sizes")
	}
	fr := NewPooledFrameReader(bytes.NewReader(frames([]byte("x"))), 1, 100, pool)
	rb := fr.rb
	if len(rb.b) != 64 || rb.pool != pool {
		t.Fatalf("pooled buffer of %d bytes", len(rb.b))
	}
	fr.Release()
	if fr.rb != nil {
		t.Fatal("Release kept the pooled buffer")
	}
	if fr.Buffered() != 0 {
		t.Fatalf("Buffered = %d after Release", fr.Buffered())
	}
	if got := pool.pool.Get().(*readBuf); got.pool != pool || len(got.b) != 64 {
		t.Fatal("the pool lent a buffer that is not its own")
	}
}

// The reader asks the source for nothing while a whole frame is buffered, so a frame that arrived
// in one read is never delayed by a read that would block.
func TestFrameReaderDoesNotReadAheadOfAFrame(t *testing.T) {
	r, w := io.Pipe()
	go func() {
		w.Write(frames([]byte("a"), []byte("b")))
		// the pipe then blocks: a reader that read again before returning "b" would hang here
	}()
	fr := NewFrameReader(r, 1, 10)
	for _, want := range []string{"a", "b"} {
		if got, err := fr.Next(); err != nil || string(got) != want {
			t.Fatalf("got %q, %v, want %q", got, err, want)
		}
	}
	r.Close()
	if _, err := fr.Next(); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("after the pipe closed: %v", err)
	}
}
