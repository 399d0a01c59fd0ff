package engine

import (
	"sync/atomic"
	"unsafe"
)

// The structures that grow with the number of stored messages — the record chunks of the slab,
// the ordered ID index's chunks and its side hash table — are pointer-free, so they can live
// outside the Go heap: big buffers are mapped from the operating system (anonymous memory,
// zero-filled) and given back when the structure shrinks, empties, or its Queue is garbage
// collected. The Go heap's size then excludes them, and with it the collector's target (GOGC
// sizes the heap at about twice what it holds live): a backlog costs its records once in RSS,
// not up to twice, and a drained queue returns the memory at once instead of at the scavenger's
// pace. Small buffers (an empty or short queue, tests) stay on the Go heap.
//
// Buffers that are touched in a few places at a time (allocSweepable: the record chunks and the
// ordered ID index's chunks) can go further, out of RSS: while a scratch directory is open they
// are regions of files there, and Sweep drops their pages from the process's memory
// (scratch.go).

// mapped counts the bytes currently mapped by every Queue of the process.
var mapped atomic.Int64

// MappedBytes returns the memory the engine's Queues hold outside the Go heap (in RSS or, for
// swept scratch regions, in the page cache; never in runtime.MemStats).
func MappedBytes() int64 { return mapped.Load() }

// mapMin is the size from which a buffer is mapped rather than taken from the Go heap (a
// variable only so that tests can map small buffers).
var mapMin = 256 << 10

const recSize = int(unsafe.Sizeof(rec{}))

// allocMapped returns a zeroed slice of n elements and whether it is mapped (see freeMapped).
// T must hold no pointers: the garbage collector does not scan mapped memory. Mapped memory
// from here is anonymous and never swept.
func allocMapped[T any](n int) ([]T, bool) {
	if size := sizeOf[T](n); size >= mapMin {
		if !takeMapping(false) {
			fellBack(fallbackMapLimit, errMapLimit)
		} else if b, ok := mapBytes(size); ok {
			return asMapped[T](b, n), true
		} else {
			releaseMapping()
		}
	}
	return make([]T, n), false
}

// allocSweepable is allocMapped for a buffer whose pages may be dropped from the process's
// memory while it is in use: a structure touched in a few places at a time (the slab's record
// chunks, a time-ordered index), not one read at random (the hash ID index, which would only
// fault). While a scratch directory is open (OpenScratch) a mapped sweepable buffer is a region
// of a file there, which Sweep drops from RSS; otherwise, or when the file cannot be reserved,
// it is allocMapped. Its contents are never lost by a sweep. Give it back with freeMapped.
func allocSweepable[T any](n int) ([]T, bool) {
	if size := sizeOf[T](n); size >= mapMin {
		if b, ok := mapScratch(size); ok {
			return asMapped[T](b, n), true
		}
	}
	return allocMapped[T](n)
}

// sizeOf is the size in bytes of n elements of T.
func sizeOf[T any](n int) int { return n * int(unsafe.Sizeof(*new(T))) }

// asMapped counts b, just mapped, in MappedBytes and returns it as n elements of T.
func asMapped[T any](b []byte, n int) []T {
	mapped.Add(int64(len(b)))
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// freeMapped gives back a slice from allocMapped or allocSweepable that was mapped; nothing may
// use it afterwards. It may run on any goroutine (a Queue's cleanup runs on the runtime's).
func freeMapped[T any](s []T, isMapped bool) {
	if isMapped && cap(s) > 0 {
		b := unsafeBytes(s)
		mapped.Add(-int64(len(b)))
		unmapRegion(b)
	}
}
