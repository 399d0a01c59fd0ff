package engine

import "unsafe"

// An Allocator gives a Queue memory outside the Go heap for the structures that grow with the
// number of stored messages — the record chunks of the slab, the ordered ID index's chunks and
// its side hash table — all pointer-free, so the garbage collector need not scan them. The Go
// heap's size then excludes them, and with it the collector's target (GOGC sizes the heap at
// about twice what it holds live): a backlog costs its records once in RSS, not up to twice, and
// a drained queue returns the memory at once instead of at the scavenger's pace.
//
// The engine does no I/O itself: the Allocator (fila-server's is server/offheap's, which maps
// memory and may back it with files it sweeps out of RSS) is given in Config.Alloc, and a Queue
// without one takes everything from the Go heap. Memory an Allocator gives must be usable like
// Go memory: a Queue reads and writes it at any time, and its contents never change but by the
// Queue's writes.
type Allocator interface {
	// Alloc returns n zeroed bytes starting on a page boundary, or nil to have the buffer made
	// on the Go heap (a small one, or no memory to be had). The Queue writes only where it put
	// something: a sweepable buffer is touched in a few places at a time (record chunks, the
	// ordered index), one that is not is read at random (the hash table).
	Alloc(n int, sweepable bool) []byte
	// Free gives back a buffer from Alloc, whole; nothing uses it afterwards. It may run on any
	// goroutine (a Queue collected without Release frees on the runtime's).
	Free(b []byte)
}

// allocBuf returns a zeroed slice of n elements from a, or from the Go heap when a is nil or
// declines, and whether it came from a (give it back with freeBuf). T must hold no pointers.
func allocBuf[T any](a Allocator, n int, sweepable bool) ([]T, bool) {
	if a != nil {
		if b := a.Alloc(n*int(unsafe.Sizeof(*new(T))), sweepable); b != nil {
			return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), true
		}
	}
	return make([]T, n), false
}

// freeBuf gives back s, from allocBuf, to a if it came from there; nothing may use it afterwards.
func freeBuf[T any](a Allocator, s []T, fromAlloc bool) {
	if fromAlloc && cap(s) > 0 {
		a.Free(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*int(unsafe.Sizeof(*new(T)))))
	}
}

const recSize = int(unsafe.Sizeof(rec{}))
