package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestReaderPrimitives(t *testing.T) {
	var b []byte
	b = AppendU8(b, 0xAB)
	b = AppendU16(b, 0x0102)
	b = AppendU32(b, 0x03040506)
	b = AppendU64(b, 0x0708090A0B0C0D0E)
	b = AppendI64(b, -2)
	b = AppendF64(b, 1.5)
	b = AppendBool(b, true)
	b = AppendUUID(b, UUID{15: 9})
	b = AppendString16(b, "héllo")
	b = AppendString32(b, "text")
	b = AppendBytes32(b, []byte{1, 2})
	b = AppendBytes16(b, nil)

	r := NewReader(b)
	if got := r.U8(); got != 0xAB {
		t.Errorf("U8 = %#x", got)
	}
	if got := r.U16(); got != 0x0102 {
		t.Errorf("U16 = %#x", got)
	}
	if got := r.U32(); got != 0x03040506 {
		t.Errorf("U32 = %#x", got)
	}
	if got := r.U64(); got != 0x0708090A0B0C0D0E {
		t.Errorf("U64 = %#x", got)
	}
	if got := r.I64(); got != -2 {
		t.Errorf("I64 = %d", got)
	}
	if got := r.F64(); got != 1.5 {
		t.Errorf("F64 = %v", got)
	}
	if got := r.Bool(); !got {
		t.Errorf("Bool = false")
	}
	if got := r.UUID(); got != (UUID{15: 9}) {
		t.Errorf("UUID = %v", got)
	}
	if got := r.String(r.Len16(65535), true); got != "héllo" {
		t.Errorf("String16 = %q", got)
	}
	if got := r.String(r.Len32(1<<31-1), true); got != "text" {
		t.Errorf("String32 = %q", got)
	}
	if got := r.Bytes(r.Len32(10)); !bytes.Equal(got, []byte{1, 2}) || cap(got) != 2 {
		t.Errorf("Bytes = %v (cap %d), want [1 2] with capacity capped", got, cap(got))
	}
	if got := r.Bytes(int(r.U16())); got != nil {
		t.Errorf("empty bytes = %v, want nil", got)
	}
	r.ExpectEnd()
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestReaderErrorsStick(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		read func(r *Reader)
		want error
		at   int
	}{
		{"truncated u32", []byte{1, 2, 3}, func(r *Reader) { r.U32() }, ErrTruncated, 0},
		{"truncated string body", []byte{0, 5, 'a'}, func(r *Reader) { r.String(r.Len16(100), true) }, ErrTruncated, 2},
		{"string over limit", []byte{0, 5, 'a', 'b', 'c', 'd', 'e'}, func(r *Reader) { r.String(r.Len16(4), true) }, ErrTooLong, 2},
		{"invalid utf-8", []byte{0, 1, 0xff}, func(r *Reader) { r.String(r.Len16(10), true) }, ErrInvalidUTF8, 2},
		{"bool of 2", []byte{2}, func(r *Reader) { r.Bool() }, ErrInvalidBool, 0},
		{"hostile count", []byte{0xff, 0xff, 0xff, 0xff, 0}, func(r *Reader) { r.Count(4, 1) }, ErrCount, 0},
		{"count of wide items", []byte{0, 2, 0, 0, 0}, func(r *Reader) { r.Count(2, 2) }, ErrCount, 0},
		{"trailing", []byte{1, 2}, func(r *Reader) { r.U8(); r.ExpectEnd() }, ErrTrailing, 1},
		{"rest over limit", []byte{1, 2, 3}, func(r *Reader) { r.Rest(2) }, ErrTooLong, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(tc.in)
			tc.read(r)
			if r.U64() != 0 || r.String(3, false) != "" || r.Len() != 0 {
				t.Fatal("reads after an error must return zero values")
			}
			var de *DecodeError
			if !errors.As(r.Err(), &de) || !errors.Is(r.Err(), tc.want) {
				t.Fatalf("err = %v, want %v", r.Err(), tc.want)
			}
			if de.Offset != tc.at {
				t.Fatalf("offset = %d, want %d", de.Offset, tc.at)
			}
		})
	}
}

func TestReaderInternsRepeatedStrings(t *testing.T) {
	var b []byte
	for range 3 {
		b = AppendString16(b, "orders")
	}
	r := NewReader(b)
	allocs := testing.AllocsPerRun(10, func() {
		r.Reset(b)
		for range 3 {
			r.String(r.Len16(100), true)
		}
	})
	if allocs > 0 {
		t.Fatalf("decoding the same string three times allocated %v times", allocs)
	}
}

func TestSortedKeysDoesNotAllocate(t *testing.T) {
	m := map[string]string{"b": "2", "a": "1", "c": "3"}
	var scratch [16]string
	var keys []string
	allocs := testing.AllocsPerRun(10, func() { keys = SortedKeys(m, &scratch) })
	if allocs > 0 || len(keys) != 3 || keys[0] != "a" || keys[2] != "c" {
		t.Fatalf("keys %v, %v allocations", keys, allocs)
	}
}

func TestCheckAndAtField(t *testing.T) {
	err := AtField("messages", 3, AtField("queue", -1, CheckString("abcdef", 5, true)))
	if got := err.Error(); got != "messages[3].queue: exceeds protocol limit: 6 bytes, at most 5 allowed" {
		t.Fatalf("message = %q", got)
	}
	if !errors.Is(err, ErrLimit) {
		t.Fatal("errors.Is(ErrLimit) = false")
	}
	if CheckString("a\xff", 5, true) == nil || CheckCount(3, 2) == nil || CheckBytes(make([]byte, 3), 2) == nil {
		t.Fatal("violations not reported")
	}
}

func TestUUID(t *testing.T) {
	u := UUID{0x01, 0x8f, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e, 0x8f, 0x90, 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07}
	s := u.String()
	if s != "018f3a4b-5c6d-7e8f-90a1-b2c3d4e5f607" {
		t.Fatalf("String = %s", s)
	}
	back, err := ParseUUID(s)
	if err != nil || back != u {
		t.Fatalf("ParseUUID = %v, %v", back, err)
	}
	for _, bad := range []string{"", "018f3a4b", s + "00", "zz8f3a4b-5c6d-7e8f-90a1-b2c3d4e5f607"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) succeeded", bad)
		}
	}
}

func frames(bodies ...[]byte) []byte {
	var b []byte
	for _, body := range bodies {
		b = AppendU32(b, uint32(len(body)))
		b = append(b, body...)
	}
	return b
}

// TestFrameReaderSplitPoints feeds the same stream whole, one byte at a time, and split at every
// offset: the frames read must not depend on how the bytes arrive.
func TestFrameReaderSplitPoints(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 100<<10) // larger than the internal buffer
	stream := frames([]byte("first"), big, []byte{1})
	want := [][]byte{[]byte("first"), big, {1}}
	readAll := func(t *testing.T, r io.Reader) {
		t.Helper()
		fr := NewFrameReader(r, 1, 1<<20)
		for i, w := range want {
			got, err := fr.Next()
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("frame %d: %d bytes, err %v", i, len(got), err)
			}
		}
		if _, err := fr.Next(); err != io.EOF {
			t.Fatalf("after the last frame: %v, want EOF", err)
		}
	}
	readAll(t, bytes.NewReader(stream))
	readAll(t, iotest.OneByteReader(bytes.NewReader(stream)))
	for split := 1; split < 12; split++ {
		readAll(t, io.MultiReader(iotest.HalfReader(bytes.NewReader(stream[:split])), bytes.NewReader(stream[split:])))
	}
}

func TestFrameReaderLimits(t *testing.T) {
	stream := frames(bytes.Repeat([]byte{9}, 50), []byte("ok"))
	fr := NewFrameReader(bytes.NewReader(stream), 1, 10)
	_, err := fr.Next()
	var fse *FrameSizeError
	if !errors.As(err, &fse) || fse.Length != 50 {
		t.Fatalf("oversized frame: %v", err)
	}
	head, err := fr.Skip(6)
	if err != nil || len(head) != 6 || head[0] != 9 {
		t.Fatalf("Skip = %v, %v", head, err)
	}
	if got, err := fr.Next(); err != nil || string(got) != "ok" {
		t.Fatalf("frame after a skipped one: %q, %v", got, err)
	}

	fr = NewFrameReader(bytes.NewReader(frames([]byte{}, []byte("x"))), 1, 10)
	if _, err := fr.Next(); !errors.As(err, &fse) {
		t.Fatalf("empty frame with min 1: %v", err)
	}

	fr = NewFrameReader(bytes.NewReader(frames([]byte{1, 2, 3, 4, 5})), 1, 10)
	fr.SetMaxFor(func(first byte) int { return int(first) + 2 }) // opcode 1 allows 3 bytes
	if _, err := fr.Next(); !errors.As(err, &fse) || fse.Max != 3 {
		t.Fatalf("per-opcode limit: %v", err)
	}

	fr = NewFrameReader(bytes.NewReader(frames([]byte("abc"))[:5]), 1, 10)
	if _, err := fr.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("stream cut mid-frame: %v, want ErrUnexpectedEOF", err)
	}
}

func TestFrameReaderShrinkDropsLargeBuffer(t *testing.T) {
	large := bytes.Repeat([]byte{7}, 200<<10) // beyond the 64 KiB read buffer
	fr := NewFrameReader(bytes.NewReader(frames(large, []byte("ok"))), 1, 1<<20)
	body, err := fr.Next()
	if err != nil || len(body) != len(large) {
		t.Fatalf("Next = %d bytes, %v", len(body), err)
	}
	if got := fr.Buffered(); got < len(large) {
		t.Fatalf("Buffered = %d after a %d-byte frame", got, len(large))
	}
	fr.Shrink(1 << 10)
	if got := fr.Buffered(); got >= len(large) {
		t.Fatalf("Buffered = %d after Shrink", got)
	}
	if body[0] != 7 || body[len(body)-1] != 7 {
		t.Fatal("a body returned before Shrink changed")
	}
	if got, err := fr.Next(); err != nil || string(got) != "ok" {
		t.Fatalf("frame after Shrink: %q, %v", got, err)
	}
}

func TestMapHintIsSmall(t *testing.T) {
	for n, want := range map[int]int{0: 0, 3: 3, 8: 8, 65535: 8} {
		if got := MapHint(n); got != want {
			t.Errorf("MapHint(%d) = %d, want %d", n, got, want)
		}
	}
}
