package offheap

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// rec stands for a record of the engine's slab (64 bytes, pointer-free) and chunkSize for the
// records of a full chunk (512 KiB), so that these tests allocate what queues allocate.
type rec struct {
	id       [16]byte
	attempts uint32
	_        [44]byte
}

const (
	chunkSize = 8192
	recSize   = int(unsafe.Sizeof(rec{}))
)

// useScratch returns an Allocator with a scratch directory in t.TempDir(), closed at the end of
// the test; with small set, every buffer of 1 KiB or more is mapped.
func useScratch(t testing.TB, small bool) (*Allocator, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("scratch regions are made on Linux only")
	}
	o := Options{}
	if small {
		o.MinSize = 1 << 10
	}
	a := New(o)
	dir := filepath.Join(t.TempDir(), "scratch")
	err := a.OpenScratch(dir, 0)
	if errors.Is(err, ErrNoReserve) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, dir
}

// allocRecs allocates n records as a queue does: mapped when Alloc maps them (sweepable or
// not), on the Go heap otherwise.
func allocRecs(a *Allocator, n int, sweepable bool) ([]rec, bool) {
	if b := a.Alloc(n*recSize, sweepable); b != nil {
		return unsafe.Slice((*rec)(unsafe.Pointer(unsafe.SliceData(b))), n), true
	}
	return make([]rec, n), false
}

// freeRecs gives back records from allocRecs.
func freeRecs(a *Allocator, ch []rec, mapped bool) {
	if mapped {
		a.Free(recBytes(ch))
	}
}

// recBytes returns the memory of ch as bytes.
func recBytes(ch []rec) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ch))), cap(ch)*recSize)
}

// isScratch reports whether ch is a registered scratch region of a.
func isScratch(a *Allocator, ch []rec) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.regions[addrOf(recBytes(ch))]
	return ok
}

// scratchMappings counts the process's mappings of files in dir (/proc/self/maps names an
// unnamed file by its directory).
func scratchMappings(t *testing.T, dir string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	return strings.Count(string(maps), dir+"/")
}

// regionsInUse counts the mappings of a's scratch directory that are not regions made ahead, once
// the maker and the unmapper are done.
func regionsInUse(t *testing.T, a *Allocator) int {
	t.Helper()
	a.scratch.spares.wait()
	a.unmapper.wait()
	return scratchMappings(t, a.scratch.dir) - a.scratch.spares.count()
}

// dropSpares gives back the regions made ahead, so that the next allocation makes its own.
func dropSpares(a *Allocator) {
	p := a.scratch.spares
	p.wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, b := range p.ready {
		delete(p.ready, n)
		p.give(b)
	}
}

// setReserve replaces the reservation of a region's space for the test, while no region is being
// made ahead (the maker reads it too).
func setReserve(t *testing.T, a *Allocator, fn func(fd int, size int64) error) {
	t.Helper()
	waitMaker(a)
	old := a.reserve
	a.reserve = fn
	t.Cleanup(func() { waitMaker(a); a.reserve = old })
}

// setStatFS replaces the file system's statfs for the test, while no region is being made ahead.
func setStatFS(t *testing.T, a *Allocator, fn func(string) (int64, int64, error)) {
	t.Helper()
	waitMaker(a)
	old := a.statFS
	a.statFS = fn
	t.Cleanup(func() { waitMaker(a); a.statFS = old })
}

// waitMaker waits until the maker of a's scratch directory, if one is open, is idle.
func waitMaker(a *Allocator) {
	a.mu.Lock()
	s := a.scratch
	a.mu.Unlock()
	if s != nil {
		s.spares.wait()
	}
}

// allocFallback allocates a full sweepable chunk where no scratch region can be made, and checks
// that it is anonymous mapped memory, counted as one fallback.
func allocFallback(t *testing.T, a *Allocator) []rec {
	t.Helper()
	before := a.Stats()
	ch, isMapped := allocRecs(a, chunkSize, true)
	if !isMapped || isScratch(a, ch) {
		t.Fatalf("mapped %v, scratch %v: want anonymous mapped memory", isMapped, isScratch(a, ch))
	}
	if got := a.Stats().Fallbacks - before.Fallbacks; got != 1 {
		t.Fatalf("%d fallbacks counted, want 1", got)
	}
	return ch
}
