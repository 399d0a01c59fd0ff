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

// allocRecs returns a zeroed slice of n records and whether it is mapped (see freeRecs).
func allocRecs(n int) ([]rec, bool) {
	if n*recSize >= mapMin {
		if b, ok := mapBytes(n * recSize); ok {
			mapped.Add(int64(len(b)))
			return unsafe.Slice((*rec)(unsafe.Pointer(unsafe.SliceData(b))), n), true
		}
	}
	return make([]rec, n), false
}

// freeRecs gives back a slice from allocRecs that was mapped; nothing may use it afterwards.
func freeRecs(s []rec, isMapped bool) {
	if isMapped && cap(s) > 0 {
		mapped.Add(-int64(cap(s) * recSize))
		unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*recSize))
	}
}

// allocWords returns a zeroed slice of n words and whether it is mapped (see freeWords).
func allocWords(n int) ([]uint64, bool) {
	if n*8 >= mapMin {
		if b, ok := mapBytes(n * 8); ok {
			mapped.Add(int64(len(b)))
			return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n), true
		}
	}
	return make([]uint64, n), false
}

// freeWords gives back a slice from allocWords that was mapped; nothing may use it afterwards.
func freeWords(s []uint64, isMapped bool) {
	if isMapped && cap(s) > 0 {
		mapped.Add(-int64(cap(s) * 8))
		unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*8))
	}
}
