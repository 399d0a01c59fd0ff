package engine

import "unsafe"

// The two structures that grow with the number of stored messages — the record chunks of the
// slab and the table of the ID index — are pointer-free, so they can live outside the Go heap:
// big buffers are mapped from the operating system (anonymous memory, zero-filled) and given
// back when the structure shrinks, empties, or its Queue is garbage collected. The Go heap's
// size then excludes them, and with it the collector's target (GOGC sizes the heap at about
// twice what it holds live): a backlog costs its records once in RSS, not up to twice, and a
// drained queue returns the memory at once instead of at the scavenger's pace. Small buffers
// (an empty or short queue, tests) stay on the Go heap.

// mapMin is the size from which a buffer is mapped rather than taken from the Go heap.
const mapMin = 256 << 10

const recSize = int(unsafe.Sizeof(rec{}))

// allocRecs returns a zeroed slice of n records and whether it is mapped (see freeRecs).
func allocRecs(n int) ([]rec, bool) {
	if n*recSize >= mapMin {
		if b, ok := mapBytes(n * recSize); ok {
			return unsafe.Slice((*rec)(unsafe.Pointer(unsafe.SliceData(b))), n), true
		}
	}
	return make([]rec, n), false
}

// freeRecs gives back a slice from allocRecs that was mapped; nothing may use it afterwards.
func freeRecs(s []rec, mapped bool) {
	if mapped && cap(s) > 0 {
		unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*recSize))
	}
}

// allocWords returns a zeroed slice of n words and whether it is mapped (see freeWords).
func allocWords(n int) ([]uint64, bool) {
	if n*8 >= mapMin {
		if b, ok := mapBytes(n * 8); ok {
			return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n), true
		}
	}
	return make([]uint64, n), false
}

// freeWords gives back a slice from allocWords that was mapped; nothing may use it afterwards.
func freeWords(s []uint64, mapped bool) {
	if mapped && cap(s) > 0 {
		unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*8))
	}
}
