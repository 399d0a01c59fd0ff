package offheap

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The structures that grow with the number of stored messages — the record chunks of a queue's
// slab, its ordered ID index's chunks and its side hash table — are pointer-free, so they can
// live outside the Go heap: big buffers are mapped from the operating system (anonymous memory,
// zero-filled) and given back when the structure shrinks, empties, or its queue is released.
// The Go heap's size then excludes them, and with it the collector's target (GOGC sizes the heap
// at about twice what it holds live): a backlog costs its records once in RSS, not up to twice,
// and a drained queue returns the memory at once instead of at the scavenger's pace. Small
// buffers (an empty or short queue, tests) stay on the Go heap.
//
// Buffers that are touched in a few places at a time (sweepable: the record chunks and the
// ordered ID index's chunks) can go further, out of RSS: while a scratch directory is open they
// are regions of files there, and Sweep drops their pages from the process's memory
// (scratch.go).

// An Allocator maps the engine's big buffers outside the Go heap; it implements
// engine.Allocator. Its methods are safe for concurrent use: queues allocate on their own
// goroutines, and give back on the runtime's when a queue that was never released is collected.
type Allocator struct {
	minSize int
	log     *slog.Logger

	mapped       atomic.Int64 // bytes mapped: anonymous buffers and scratch regions in use
	scratchBytes atomic.Int64 // of which scratch regions
	mappings     atomic.Int64 // the mappings held (mapshare.go)
	limit        atomic.Int64 // vm.max_map_count (tests set it)

	fallbacks      [numFallbacks]atomic.Int64
	fallbackLogged [numFallbacks]sync.Once

	// mu guards scratch, regions and closed, and is held while a region is swept: a region is
	// swept only while it is registered, and it leaves the registry (under mu) before its memory
	// is given back, so a sweep never advises memory that is unmapped, or mapped again for
	// something else. The unmapping itself runs outside mu (the unmapper): giving a region back
	// frees its file (an inode eviction, up to tens of milliseconds), which must not hold up
	// sweeps nor other queues.
	mu      sync.Mutex
	scratch *scratch           // nil while no scratch directory is open
	regions map[uintptr][]byte // scratch regions in use, by address
	closed  bool

	sweepMu sync.Mutex // one eachRegion at a time
	addrs   []uintptr  // eachRegion's copy of the registry's keys (under sweepMu)

	unmapper *regionUnmapper

	// The file system calls a test replaces (scratch_linux.go): reserving a region's blocks, and
	// the type and free space of a directory's file system.
	reserve func(fd int, size int64) error
	statFS  func(dir string) (fsType int64, free int64, err error)
	seq     atomic.Uint64 // names the files of systems without unnamed files
}

// Options tunes an Allocator. The zero value is the server's.
type Options struct {
	// MinSize is the size from which a buffer is mapped; smaller ones are left to the Go heap
	// (Alloc returns nil). 256 KiB when zero.
	MinSize int
	// Logger receives the first fallback of each kind (a buffer made the next way down);
	// slog.Default() when nil.
	Logger *slog.Logger
}

// DefaultMinSize is Options.MinSize's default: an empty or short queue stays on the Go heap.
const DefaultMinSize = 256 << 10

// New returns an Allocator without a scratch directory (see OpenScratch). Close it when the
// process no longer needs it.
func New(o Options) *Allocator {
	a := &Allocator{minSize: o.MinSize, log: o.Logger, regions: make(map[uintptr][]byte),
		reserve: reserveFile, statFS: statFileSystem}
	if a.minSize <= 0 {
		a.minSize = DefaultMinSize
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.limit.Store(readMaxMapCount())
	a.unmapper = newRegionUnmapper(unmapFile, a.releaseMapping)
	return a
}

// Alloc returns n zeroed bytes outside the Go heap, starting on a page boundary, or nil when the
// buffer should come from the Go heap: n is below MinSize, or no mapping could be made (past the
// mapping share, or refused by the system; counted in Stats). A sweepable buffer — one touched in
// a few places at a time, never read at random — is a scratch region while a scratch directory
// is open (its pages may leave RSS at a Sweep; its contents never change by one). Give it back
// with Free.
func (a *Allocator) Alloc(n int, sweepable bool) []byte {
	if n < a.minSize {
		return nil
	}
	if sweepable {
		if b, ok := a.mapScratch(n); ok {
			a.mapped.Add(int64(len(b)))
			return b
		}
	}
	if !a.takeMapping(false) {
		a.fellBack(fallbackMapLimit, errMapLimit)
		return nil
	}
	b, ok := mapBytes(n)
	if !ok {
		a.releaseMapping()
		return nil
	}
	a.mapped.Add(int64(len(b)))
	return b
}

// Free gives back b, which Alloc returned (the whole of it); nothing may use it afterwards. It may
// run on any goroutine, also after Close.
func (a *Allocator) Free(b []byte) {
	a.mapped.Add(-int64(len(b)))
	addr := addrOf(b)
	a.mu.Lock()
	_, isRegion := a.regions[addr]
	delete(a.regions, addr)
	a.mu.Unlock()
	if isRegion {
		a.scratchBytes.Add(-int64(len(b)))
		a.unmapper.give(b)
		return
	}
	unmapBytes(b)
	a.releaseMapping()
}

// Close closes the scratch directory, if one is open (new sweepable buffers are then anonymous
// memory, and the regions made ahead are given back), and waits until the regions given back so
// far are unmapped. Buffers in use stay valid; one freed afterwards is unmapped by Free itself.
// Closing on a disk that no longer answers may wait in the kernel: the caller bounds its wait.
func (a *Allocator) Close() error {
	a.mu.Lock()
	s, closed := a.scratch, a.closed
	a.scratch, a.closed = nil, true
	a.mu.Unlock()
	if closed {
		return errors.New("offheap: allocator closed twice")
	}
	if s != nil {
		s.spares.close()
	}
	a.unmapper.stop()
	return nil
}

// Stats describes an Allocator's memory.
type Stats struct {
	Mapped    int64 // bytes mapped: anonymous memory and scratch regions
	Scratch   int64 // of which scratch regions: file space reserved in the scratch directory
	Resident  int64 // bytes of scratch regions in the process's memory (RSS) now
	Cached    int64 // bytes of scratch regions in the page cache, resident or swept
	Fallbacks int64 // sweepable buffers made anonymous because no scratch region could be made
	// MapLimitFallbacks counts buffers made the next way down (anonymous memory instead of a
	// scratch region, the Go heap instead of anonymous memory) because the Allocator's mappings
	// reached their share of vm.max_map_count (mapshare.go).
	MapLimitFallbacks int64
	Mappings          int64 // the Allocator's mappings now
	MappingLimit      int64 // vm.max_map_count
}

// Stats returns the Allocator's mapped memory. Resident and Cached cost a few system calls per
// region (a scrape, not a hot path); they are zero where the system cannot tell. Counting passes
// only a region's addresses to the system (mincore, /proc/self/pagemap), never touches its
// memory, so it runs without the registry's lock: region creation, sweeps and frees do not wait
// for it, and a region given back meanwhile is counted as whatever its addresses hold then (an
// error of one scrape, never a fault).
func (a *Allocator) Stats() Stats {
	st := Stats{Mapped: a.mapped.Load(), Scratch: a.scratchBytes.Load(), Fallbacks: a.fallbacks[fallbackNoFile].Load(),
		MapLimitFallbacks: a.fallbacks[fallbackMapLimit].Load(), Mappings: a.mappings.Load(), MappingLimit: a.limit.Load()}
	a.mu.Lock()
	regions := make([][]byte, 0, len(a.regions))
	for _, r := range a.regions {
		regions = append(regions, r)
	}
	a.mu.Unlock()
	pages := openResidency()
	defer pages.close()
	for _, r := range regions {
		res, cached := pages.count(r)
		st.Resident += res
		st.Cached += cached
	}
	return st
}

// Residency returns the bytes of b, a buffer from Alloc, that are in the process's memory and in
// the page cache (zero where the system cannot tell); for tests and diagnostics.
func Residency(b []byte) (resident, cached int64) {
	pages := openResidency()
	defer pages.close()
	return pages.count(b)
}

// addrOf returns the address of b's first byte, the registry's key.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
