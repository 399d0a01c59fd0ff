package offheap

import "errors"

// An Allocator's mappings are bounded by vm.max_map_count, which counts every mapping of the
// process (the Go runtime's heap, the libraries', ours). Past it an mmap fails with ENOMEM, and
// so does an munmap that would split a mapping in two, which the Go runtime treats as fatal. Each
// scratch region is a mapping of its own (a file of its own: it never merges with another, so
// giving one back never splits a mapping), about 13,700 per 100 M stored messages; an anonymous
// buffer may merge with its neighbours, and giving one back from the middle of a merged mapping
// splits it. So the Allocator counts its mappings (mappings: every mapped buffer, scratch region
// or not, including regions made ahead and those waiting to be unmapped, each as one) and keeps
// them to a share of the limit: a scratch region is made only while it holds fewer than
// 1/scratchShare of the limit's mappings, any other mapping while it holds fewer than
// mapShareNum/mapShareDen. A buffer past its share is made the next way down: a sweepable buffer
// anonymous memory, an anonymous buffer Go heap (counted in Stats.MapLimitFallbacks, logged
// once). At the default limit, 65,530, that is up to 32,765 scratch regions (about 16 GiB of
// records and index), and at least 16,383 mappings left for everything else.
const (
	scratchShare = 2 // scratch regions: up to 1/2 of vm.max_map_count
	mapShareNum  = 3 // every mapping of the Allocator: up to 3/4 of it
	mapShareDen  = 4

	// defaultMaxMapCount is Linux's default vm.max_map_count, assumed where it cannot be read.
	defaultMaxMapCount = 65530
)

// takeMapping counts one more mapping if it stays within bound (a scratch region within the
// scratch share, any other mapping within the Allocator's share); false if it would not. Give it
// back with releaseMapping when the mapping fails or is unmapped.
func (a *Allocator) takeMapping(scratch bool) bool {
	bound := a.limit.Load() * mapShareNum / mapShareDen
	if scratch {
		bound = a.limit.Load() / scratchShare
	}
	for {
		n := a.mappings.Load()
		if n >= bound {
			return false
		}
		if a.mappings.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (a *Allocator) releaseMapping() { a.mappings.Add(-1) }

// ErrNoReserve is wrapped by OpenScratch's error when the directory's file system does not keep
// what fallocate reserves (btrfs, ZFS, a tmpfs, no fallocate).
var ErrNoReserve = errors.New("fallocate does not guarantee the space of a shared mapping there " +
	"(a write to a full disk would fault); the records stay in anonymous memory")

// errMapLimit: the Allocator's mappings reached their share of vm.max_map_count.
var errMapLimit = errors.New("the engine's mappings reached their share of vm.max_map_count")

// errKeepFree: a region would take disk space kept for the store.
var errKeepFree = errors.New("the disk space left is kept for the store")

// A fallback is a buffer made the next way down (see above); each kind is counted and logged once.
type fallback int

const (
	fallbackNoFile   fallback = iota // no scratch region could be made: anonymous memory
	fallbackMapLimit                 // past the mapping share: anonymous memory, or the Go heap
	numFallbacks
)

// fellBack counts a fallback of kind f, caused by err, logging the first of each kind.
func (a *Allocator) fellBack(f fallback, err error) {
	a.fallbacks[f].Add(1)
	a.fallbackLogged[f].Do(func() {
		switch f {
		case fallbackNoFile:
			a.log.Warn("engine: a queue's records go to anonymous memory instead of a scratch file "+
				"(logged once; counted in fila_engine_scratch_fallbacks_total)", "err", err)
		case fallbackMapLimit:
			a.log.Warn("engine: a queue's records go to anonymous memory or the Go heap instead of a new mapping "+
				"(logged once; counted in fila_engine_map_limit_fallbacks_total)",
				"err", err, "vm.max_map_count", a.limit.Load(), "engine_mappings", a.mappings.Load())
		}
	})
}
