package faultfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestFileModel drives the overlay with random writes, truncations, syncs and drops and checks
// every read, and the backing file after every sync, against a plain byte-slice model: cur is
// the logical content, durable what a power cut leaves.
func TestFileModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		path := filepath.Join(t.TempDir(), "f")
		initial := randBytes(rng, rng.IntN(3000))
		if err := os.WriteFile(path, initial, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := newFile(b, 0, int64(len(initial)))
		cur, durable := bytes.Clone(initial), bytes.Clone(initial)
		for step := range 2000 {
			switch op := rng.IntN(100); {
			case op < 55:
				off := rng.IntN(len(cur) + 200)
				p := randBytes(rng, 1+rng.IntN(300))
				f.writeAt(p, int64(off))
				if end := off + len(p); end > len(cur) {
					cur = append(cur, make([]byte, end-len(cur))...)
				}
				copy(cur[off:], p)
			case op < 65:
				n := rng.IntN(len(cur) + 200)
				f.truncate(int64(n))
				cur = resize(cur, n)
			case op < 72:
				if _, err := f.sync(); err != nil {
					t.Fatal(err)
				}
				durable = bytes.Clone(cur)
				onDisk, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(onDisk, durable) {
					t.Fatalf("seed %d step %d: after sync the backing file differs from the content", seed, step)
				}
			case op < 76:
				f.drop()
				cur = bytes.Clone(durable)
			default:
				off := rng.IntN(len(cur) + 50)
				p := make([]byte, rng.IntN(600))
				n, err := f.readAt(p, int64(off))
				if err != nil {
					t.Fatal(err)
				}
				want := []byte{}
				if off < len(cur) {
					want = cur[off:min(len(cur), off+len(p))]
				}
				if !bytes.Equal(p[:n], want) {
					t.Fatalf("seed %d step %d: read %d at %d: got %q, want %q", seed, step, len(p), off, clip(p[:n]), clip(want))
				}
			}
			if f.size != int64(len(cur)) {
				t.Fatalf("seed %d step %d: size %d, want %d", seed, step, f.size, len(cur))
			}
			checkExtents(t, f)
		}
		b.Close()
	}
}

// checkExtents fails unless the overlay's extents are sorted, disjoint, not touching, inside
// the file, and add up to pending.
func checkExtents(t *testing.T, f *file) {
	t.Helper()
	var sum int64
	for i, e := range f.ext {
		if len(e.data) == 0 || e.end() > f.size || (i > 0 && f.ext[i-1].end() >= e.off) {
			t.Fatalf("bad extents %v (size %d)", extentSpans(f), f.size)
		}
		sum += int64(len(e.data))
	}
	if sum != f.pending {
		t.Fatalf("pending %d, extents hold %d", f.pending, sum)
	}
}

func extentSpans(f *file) [][2]int64 {
	var s [][2]int64
	for _, e := range f.ext {
		s = append(s, [2]int64{e.off, e.end()})
	}
	return s
}

func randBytes(rng *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte('a' + rng.IntN(26))
	}
	return p
}

// resize truncates or zero-extends b to n bytes.
func resize(b []byte, n int) []byte {
	if n <= len(b) {
		return b[:n]
	}
	return append(b, make([]byte, n-len(b))...)
}

func TestDirtyTracksEveryKindOfChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f := newFile(b, 0, 10)
	for _, change := range []func(){
		func() { f.writeAt([]byte("x"), 3) },
		func() { f.truncate(4) },
		func() { f.truncate(20) },
		func() { f.truncate(4); f.truncate(10) }, // same size, but bytes 4..9 now read as zero
	} {
		if f.dirty() {
			t.Fatal("dirty before the change")
		}
		change()
		if !f.dirty() {
			t.Fatal("a change left the file clean")
		}
		f.drop()
	}
	if got, _ := os.ReadFile(path); string(got) != "0123456789" {
		t.Fatalf("drops wrote to the backing file: %q", got)
	}
}
