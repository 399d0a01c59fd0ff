package faultfs

import (
	"errors"
	"io"
	"os"
	"slices"
	"sort"
)

// file is one regular file of the mount: its backing file holds the durable image, and the
// overlay holds what changed since the last sync. Logically, byte x of the file (x < size) is
// the newest extent covering x if there is one, else the backing byte when x < cut, else zero.
// A file is not safe for concurrent use; the FS serializes access.
type file struct {
	backing *os.File // opened read-write; its inode identifies the file
	ino     uint64
	opens   int // open handles of the mount on this file

	durable int64    // size of the backing file
	size    int64    // logical size
	cut     int64    // lowest size since the last sync: backing bytes at or past it read as zero
	ext     []extent // unsynced data: sorted by offset, disjoint and never touching
	pending int64    // bytes held by ext
}

// extent is a run of unsynced bytes starting at off.
type extent struct {
	off  int64
	data []byte
}

func (e *extent) end() int64 { return e.off + int64(len(e.data)) }

// newFile wraps an open backing file whose size is size.
func newFile(backing *os.File, ino uint64, size int64) *file {
	return &file{backing: backing, ino: ino, durable: size, size: size, cut: size}
}

// dirty reports whether anything about the file is unsynced.
func (f *file) dirty() bool {
	return len(f.ext) > 0 || f.size != f.durable || f.cut != f.durable
}

// readAt fills p with the logical content at off, returning how many bytes lie before the end
// of the file (0 at or past it).
func (f *file) readAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), f.size-off)]
	end := off + int64(len(p))
	from := 0
	if off < f.cut {
		n, err := f.backing.ReadAt(p[:min(end, f.cut)-off], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		from = n
	}
	clear(p[from:])
	for i := f.first(off + 1); i < len(f.ext) && f.ext[i].off < end; i++ {
		e := &f.ext[i]
		lo, hi := max(e.off, off), min(e.end(), end)
		copy(p[lo-off:hi-off], e.data[lo-e.off:hi-e.off])
	}
	return len(p), nil
}

// first is the index of the first extent ending at or after off.
func (f *file) first(off int64) int {
	return sort.Search(len(f.ext), func(i int) bool { return f.ext[i].end() >= off })
}

// writeAt puts p at off in the overlay, growing the file when it writes past the end.
func (f *file) writeAt(p []byte, off int64) {
	if len(p) == 0 {
		return
	}
	end := off + int64(len(p))
	f.size = max(f.size, end)
	i := f.first(off)
	j := i + sort.Search(len(f.ext)-i, func(k int) bool { return f.ext[i+k].off > end })
	if i == j {
		f.ext = slices.Insert(f.ext, i, extent{off: off, data: slices.Clone(p)})
		f.pending += int64(len(p))
		return
	}
	// ext[i:j] overlap or touch [off, end): together with p they cover one contiguous run.
	start, stop := min(f.ext[i].off, off), max(f.ext[j-1].end(), end)
	var buf []byte
	from := i
	if f.ext[i].off == start { // grow the first extent in place: appends stay amortized O(1)
		f.pending -= int64(len(f.ext[i].data))
		buf = slices.Grow(f.ext[i].data, int(stop-start)-len(f.ext[i].data))[:stop-start]
		from++
	} else {
		buf = make([]byte, stop-start)
	}
	for k := from; k < j; k++ {
		f.pending -= int64(len(f.ext[k].data))
		copy(buf[f.ext[k].off-start:], f.ext[k].data)
	}
	copy(buf[off-start:], p)
	f.pending += stop - start
	f.ext[i] = extent{off: start, data: buf}
	f.ext = slices.Delete(f.ext, i+1, j)
}

// truncate sets the logical size: shrinking discards the overlay past n and makes backing
// bytes past n read as zero from now on; growing adds zeros.
func (f *file) truncate(n int64) {
	if n < f.size {
		i := f.first(n + 1)
		if i < len(f.ext) && f.ext[i].off < n {
			f.pending -= f.ext[i].end() - n
			f.ext[i].data = f.ext[i].data[:n-f.ext[i].off]
			i++
		}
		for _, e := range f.ext[i:] {
			f.pending -= int64(len(e.data))
		}
		f.ext = f.ext[:i]
		f.cut = min(f.cut, n)
	}
	f.size = n
}

// sync makes the logical content durable: the backing file is cut, written and sized to match.
// It returns the overlay bytes written. On error the overlay is kept, and a later sync redoes
// the whole sequence.
func (f *file) sync() (int64, error) {
	if !f.dirty() {
		return 0, nil
	}
	if f.cut < f.durable {
		if err := f.backing.Truncate(f.cut); err != nil {
			return 0, err
		}
	}
	for _, e := range f.ext {
		if _, err := f.backing.WriteAt(e.data, e.off); err != nil {
			return 0, err
		}
	}
	if err := f.backing.Truncate(f.size); err != nil {
		return 0, err
	}
	n := f.pending
	f.durable, f.cut, f.ext, f.pending = f.size, f.size, nil, 0
	return n, nil
}

// drop discards the overlay, as a power cut would, returning the bytes it held.
func (f *file) drop() int64 {
	n := f.pending
	f.size, f.cut, f.ext, f.pending = f.durable, f.durable, nil, 0
	return n
}
