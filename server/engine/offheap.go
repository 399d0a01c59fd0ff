package engine

import (
	"sync/atomic"
	"unsafe"
)

// The two structures that grow with the number of stored messages — the record chunks of the
// slab and the table of the ID index — are pointer-free, so they can live outside the Go heap:
// big buffers are mapped from the operating system (anonymous memory, zero-filled) and given
// back when the structure shrinks, empties, or its Queue is garbage collected. The Go heap's
// size then excludes them, and with it the collector's target (GOGC sizes the heap at about
// twice what it holds live): a backlog costs its records once in RSS, not up to twice, and a
// drained queue returns the memory at once instead of at the scavenger's pace. Small buffers
// (an empty or short queue, tests) stay on the Go heap.

// mapped counts the bytes currently mapped by every Queue of the process.
var mapped atomic.Int64

// MappedBytes returns the memory the engine's Queues hold outside the Go heap (in RSS, not in
// runtime.MemStats).
func MappedBytes() int64 { return mapped.Load() }

// mapMin is the size from which a buffer is mapped rather than taken from the Go heap.
const mapMin = 256 << 10

const recSize = int(unsafe.Sizeof(rec{}))

// allocMapped returns a zeroed slice of n elements and whether it is mapped (see freeMapped).
// T must hold no pointers: the garbage collector does not scan mapped memory.
func allocMapped[T any](n int) ([]T, bool) {
	size := int(unsafe.Sizeof(*new(T)))
	if n*size >= mapMin {
		if b, ok := mapBytes(n * size); ok {
			mapped.Add(int64(len(b)))
			return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), true
		}
	}
	return make([]T, n), false
}

// allocSweepable is allocMapped for a buffer whose pages may be dropped from the process's
// memory while it is in use: a structure touched in a few places at a time (the slab's record
// chunks, a time-ordered index), not one read at random (the hash ID index, which would only
// fault). While a scratch directory is open (OpenScratch) a mapped sweepable buffer is a region
// of a file there and the periodic sweep drops its pages from RSS; otherwise it is allocMapped.
// Give it back with freeMapped like any other.
func allocSweepable[T any](n int) ([]T, bool) {
	return allocMapped[T](n)
}

// freeMapped gives back a slice from allocMapped that was mapped; nothing may use it afterwards.
func freeMapped[T any](s []T, isMapped bool) {
	if isMapped && cap(s) > 0 {
		size := int(unsafe.Sizeof(*new(T)))
		mapped.Add(-int64(cap(s) * size))
		unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*size))
	}
}
