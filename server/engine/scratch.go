package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A Scratch is a directory, on the data directory's disk, whose files back the engine's
// sweepable buffers (allocSweepable: the slab's record chunks). While one is open, each mapped
// sweepable buffer is a region of its own unnamed file there, mapped shared, its whole size
// reserved on disk when it is created: a disk too full to hold it makes it anonymous memory
// instead, so running out of space is a fallback at allocation, never a fault on a later write.
//
// Sweep drops the pages of every such region from the process's memory. They stay in the
// kernel's page cache, which writes them back to the file and may evict them when memory is
// short; the next access maps a page back (a minor fault, or a read if it was evicted). A
// standing backlog's records then cost page cache, which the kernel can reclaim, instead of RSS,
// which it cannot (there is no swap). Nothing is lost or reordered: a sweep is invisible to the
// Queues, and the engine stays deterministic.
//
// The files are not part of durability: a restart rebuilds every Queue from the queue log and its
// snapshot. They have no name (O_TMPFILE), so they vanish with the process; where the file
// system cannot make unnamed files each one is named and unlinked at once, and OpenScratch
// removes what a crash left between the two.
//
// Scratch files are made only on file systems that keep what fallocate reserves (ext4, XFS): on
// btrfs or ZFS (copy on write), a tmpfs (memory already) or a system without fallocate, a write
// to a full disk through a shared mapping would be a fault (SIGBUS), so OpenScratch refuses the
// directory and the records stay in anonymous memory. A region is not made where it would leave
// less than ScratchOptions.KeepFree of the disk free (the store's reserve and room for its
// writes: a full disk is then met by the store, which answers StorageError, never by a region),
// nor past the engine's share of vm.max_map_count (scratch_guard.go).
//
// Scratch state is the process's, like MappedBytes: new regions go to the most recently opened
// Scratch still open, and Sweep covers every region, whichever Scratch made it. A region outlives
// its Scratch's Close (it is given back when its buffer is); Close only stops new ones.
type Scratch struct {
	dir      string
	keepFree int64
	spares   *spares // regions made ahead (scratch_spare.go)
	// makeMu makes the free-space check and the file's allocation one step: the maker of
	// spares and an allocation that found none make regions at the same time, and two checks
	// before either file took its blocks would both pass, leaving less than keepFree free.
	makeMu sync.Mutex
}

// ScratchOptions tunes a Scratch.
type ScratchOptions struct {
	// KeepFree is the disk space regions never take: a region is made only if the file system
	// keeps at least this much free beside it.
	KeepFree int64
	// Log receives the first fallback of each kind (a buffer made the next way down); by
	// default slog.Default().
	Log *slog.Logger
}

// scratchPrefix starts the name of every named scratch file (OpenScratch removes them).
const scratchPrefix = "region-"

// pager is the process's scratch state.
var pager struct {
	// mu guards open and regions, and is held while a region is swept: a region is swept only
	// while it is registered, and it leaves the registry (under mu) before its memory is given
	// back, so a sweep never advises memory that is unmapped, or mapped again for something
	// else. The unmapping itself runs outside mu: giving a region back frees its file (an inode
	// eviction, up to tens of milliseconds), which must not hold up sweeps nor other queues.
	mu      sync.Mutex
	open    []*Scratch         // newest last
	regions map[uintptr][]byte // file-backed regions by address

	sweepMu sync.Mutex // one eachRegion at a time
	addrs   []uintptr  // eachRegion's copy of the registry's keys (under sweepMu)
}

var (
	scratchBytes atomic.Int64 // bytes of file-backed regions
)

// OpenScratch makes dir (if needed), removes the scratch files a crashed process left in it,
// checks that its file system keeps reserved space and that a region can be made there, and from
// then on makes sweepable buffers regions of files in dir. Close it when the server stops.
func OpenScratch(dir string, o ScratchOptions) (*Scratch, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("engine: scratch directory: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("engine: scratch directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), scratchPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("engine: stale scratch file: %w", err)
			}
		}
	}
	if err := checkReserves(dir); err != nil {
		return nil, fmt.Errorf("engine: scratch directory %s: %w", dir, err)
	}
	probe, err := mapFile(dir, os.Getpagesize())
	if err != nil {
		return nil, fmt.Errorf("engine: scratch directory %s: %w", dir, err)
	}
	unmapFile(probe)
	s := &Scratch{dir: dir, keepFree: o.KeepFree}
	s.spares = startSpares(s.makeRegion)
	if o.Log != nil {
		fallbackLog.Store(o.Log)
	}
	pager.mu.Lock()
	pager.open = append(pager.open, s)
	pager.mu.Unlock()
	return s, nil
}

// makeRegion makes a region of n bytes in s's directory, within the mapping share and leaving
// KeepFree of the disk free.
func (s *Scratch) makeRegion(n int) ([]byte, error) {
	if !takeMapping(true) {
		return nil, errMapLimit
	}
	s.makeMu.Lock()
	defer s.makeMu.Unlock()
	free, err := freeSpace(s.dir)
	if err == nil && free-int64(n) < s.keepFree {
		err = fmt.Errorf("%w: %d bytes free, %d kept", errKeepFree, free, s.keepFree)
	}
	var b []byte
	if err == nil {
		b, err = mapFile(s.dir, n)
	}
	if err != nil {
		releaseMapping()
		return nil, err
	}
	return b, nil
}

// Close stops making regions in s's directory (sweepable buffers go to the Scratch opened before
// it, if still open, or become anonymous memory) and gives back the regions made ahead. Regions
// in use stay valid until given back.
func (s *Scratch) Close() error {
	pager.mu.Lock()
	i := slices.Index(pager.open, s)
	if i >= 0 {
		pager.open = slices.Delete(pager.open, i, i+1)
	}
	pager.mu.Unlock()
	if i < 0 {
		return errors.New("engine: scratch closed twice")
	}
	s.spares.close()
	return nil
}

// mapScratch maps n bytes as a region of a new file of the newest open Scratch, made ahead if one
// is ready; false when none is open or no region can be made (a fallback, counted).
func mapScratch(n int) ([]byte, bool) {
	pager.mu.Lock()
	var s *Scratch
	if len(pager.open) > 0 {
		s = pager.open[len(pager.open)-1]
	}
	pager.mu.Unlock()
	if s == nil {
		return nil, false
	}
	b := s.spares.take(n)
	if b == nil {
		var err error
		if b, err = s.makeRegion(n); err != nil { // outside the lock: a sweep need not wait for the disk
			if errors.Is(err, errMapLimit) {
				fellBack(fallbackMapLimit, err)
			} else {
				fellBack(fallbackNoFile, err)
			}
			return nil, false
		}
	}
	pager.mu.Lock()
	if pager.regions == nil {
		pager.regions = make(map[uintptr][]byte)
	}
	pager.regions[addrOf(b)] = b
	pager.mu.Unlock()
	scratchBytes.Add(int64(len(b)))
	return b, true
}

// unmapRegion gives back b, mapped by mapBytes or mapScratch, first taking it out of the registry.
func unmapRegion(b []byte) {
	addr := addrOf(b)
	pager.mu.Lock()
	_, isRegion := pager.regions[addr]
	delete(pager.regions, addr)
	pager.mu.Unlock()
	if isRegion {
		scratchBytes.Add(-int64(len(b)))
		unmapper.give(b)
		return
	}
	unmapBytes(b)
	releaseMapping()
}

// unmapper unmaps scratch regions on a goroutine of its own. Unmapping a region frees its
// unnamed file, and the file system's freeing of the reserved blocks costs 0.3–35 ms per region:
// on the Queue's goroutine, the ack that drains a 10 M-message queue would stall it for seconds.
// A region handed over is out of the registry already (no sweep can reach it) and nothing uses
// it any more; until it is unmapped its addresses stay taken, so they cannot be reused early.
var unmapper = newRegionUnmapper()

type regionUnmapper struct {
	start   sync.Once
	mu      sync.Mutex
	cond    sync.Cond // signalled when pending grows and when the goroutine goes idle
	pending [][]byte
	busy    bool         // the goroutine is unmapping regions taken from pending
	unmap   func([]byte) // unmapFile; tests hold it up
}

func newRegionUnmapper() *regionUnmapper {
	u := &regionUnmapper{unmap: unmapFile}
	u.cond.L = &u.mu
	return u
}

// give queues b to be unmapped, starting the goroutine on first use.
func (u *regionUnmapper) give(b []byte) {
	u.start.Do(func() { go u.loop() })
	u.mu.Lock()
	u.pending = append(u.pending, b)
	u.mu.Unlock()
	u.cond.Broadcast()
}

func (u *regionUnmapper) loop() {
	var batch [][]byte
	for {
		u.mu.Lock()
		for len(u.pending) == 0 {
			u.busy = false
			u.cond.Broadcast()
			u.cond.Wait()
		}
		batch, u.pending = u.pending, batch[:0]
		u.busy = true
		unmap := u.unmap
		u.mu.Unlock()
		for i, b := range batch {
			unmap(b)
			releaseMapping()
			batch[i] = nil
		}
	}
}

// wait returns once every region handed over so far is unmapped.
func (u *regionUnmapper) wait() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for len(u.pending) > 0 || u.busy {
		u.cond.Wait()
	}
}

// addrOf returns the address of b's first byte, the registry's key.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Sweep drops the pages of every scratch region from the process's memory (see Scratch) and
// returns the bytes of the regions it swept. It may run at any time on any goroutine, beside the
// goroutines driving Queues; the server runs it about once a second. Anonymous memory is never
// swept (dropping its pages would zero them).
func Sweep() int64 {
	var swept int64
	eachRegion(func(r []byte) {
		dropPages(r)
		swept += int64(len(r))
	})
	return swept
}

// eachRegion calls fn for every scratch region, holding pager.mu for one region at a time (a
// sweep must not advise memory given back), so that a free waits for one call at most; fn must
// not keep r.
func eachRegion(fn func(r []byte)) {
	pager.sweepMu.Lock()
	defer pager.sweepMu.Unlock()
	pager.mu.Lock()
	addrs := pager.addrs[:0]
	for a := range pager.regions {
		addrs = append(addrs, a)
	}
	pager.mu.Unlock()
	for _, a := range addrs {
		pager.mu.Lock()
		if r, ok := pager.regions[a]; ok {
			fn(r)
		}
		pager.mu.Unlock()
	}
	pager.addrs = addrs[:0]
}

// MappedStats describes the engine's memory outside the Go heap.
type MappedStats struct {
	Mapped    int64 // bytes mapped (MappedBytes): anonymous memory and scratch regions
	Scratch   int64 // of which scratch regions: file space reserved in the scratch directory
	Resident  int64 // bytes of scratch regions in the process's memory (RSS) now
	Cached    int64 // bytes of scratch regions in the page cache, resident or swept
	Fallbacks int64 // sweepable buffers made anonymous because no scratch region could be made
	// MapLimitFallbacks counts buffers made the next way down (anonymous memory instead of a
	// scratch region, the Go heap instead of anonymous memory) because the engine's mappings
	// reached their share of vm.max_map_count (scratch_guard.go).
	MapLimitFallbacks int64
	Mappings          int64 // the engine's mappings now
	MappingLimit      int64 // vm.max_map_count
}

// ReadMappedStats returns the engine's mapped memory. Resident and Cached cost a few system
// calls per region (a scrape, not a hot path); they are zero where the system cannot tell.
// Counting passes only a region's addresses to the system (mincore, /proc/self/pagemap), never
// touches its memory, so it runs without pager.mu: region creation, sweeps and frees do not wait
// for it, and a region given back meanwhile is counted as whatever its addresses hold then (an
// error of one scrape, never a fault).
func ReadMappedStats() MappedStats {
	st := MappedStats{Mapped: mapped.Load(), Scratch: scratchBytes.Load(), Fallbacks: fallbacks[fallbackNoFile].Load(),
		MapLimitFallbacks: fallbacks[fallbackMapLimit].Load(), Mappings: mappings.Load(), MappingLimit: mapLimit()}
	pager.mu.Lock()
	regions := slices.Collect(maps.Values(pager.regions))
	pager.mu.Unlock()
	pages := openResidency()
	defer pages.close()
	for _, r := range regions {
		res, cached := pages.count(r)
		st.Resident += res
		st.Cached += cached
	}
	return st
}

// unsafeBytes returns the memory of s as bytes.
func unsafeBytes[T any](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*int(unsafe.Sizeof(*new(T))))
}
