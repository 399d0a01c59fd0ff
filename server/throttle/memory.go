package throttle

import (
	"maps"
	"slices"
	"unsafe"
)

// What the buckets hold, as the bound (Registry.maxMemory) counts it: every allocation of a
// bucket rounded up to the allocator's size class, as the heap holds it, plus a fixed part for the
// bucket's struct and its entry in its throttle's map. TestCountedMemoryCoversTheHeap checks the
// count against the heap.

// bucketBase is what a bucket costs besides its key and windows: the struct (80 bytes) and its
// entry in the throttle's map (a 32-byte slot, up to about 75 bytes with the map's spare room).
const bucketBase = 200

// windowSize is one window in its bucket's windows.
const windowSize = int64(unsafe.Sizeof(window{}))

// sizeClasses are the Go allocator's size classes up to 32 KiB (runtime/sizeclasses.go).
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288,
	320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304,
	2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288,
	13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocSize is what the heap holds for an allocation of n bytes: its size class, or whole 8 KiB
// pages above 32 KiB; 0 for none.
func allocSize(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n > sizeClasses[len(sizeClasses)-1] {
		return (n + 8191) &^ 8191
	}
	i, _ := slices.BinarySearch(sizeClasses[:], n)
	return sizeClasses[i]
}

// memory is what b holds.
func (b *bucket) memory() int64 {
	n := bucketBase + allocSize(int64(len(b.key.Group))) + allocSize(int64(len(b.windows))*windowSize)
	for i := range b.windows {
		n += b.windows[i].memory()
	}
	return n
}

// memory is what w holds besides its place in its bucket's windows: its times or slots.
func (w *window) memory() int64 {
	return allocSize(int64(8*cap(w.times))) + allocSize(int64(8*cap(w.slots)))
}

// windowMemory is what newWindow(l) holds (window.memory), worked out without making it.
func windowMemory(l Limit) int64 {
	n := int64(l.Max)
	if l.Max > exactMax {
		_, n = slotsOf(l)
	}
	return allocSize(8 * n)
}

// newBucketMemory is what a new bucket of t would hold (bucket.memory of newBucket's), worked out
// without making it.
func (t *Throttle) newBucketMemory(k BucketKey) int64 {
	n := bucketBase + allocSize(int64(len(k.Group))) + allocSize(int64(len(t.limits))*windowSize)
	for _, l := range t.limits {
		n += windowMemory(l)
	}
	return n
}

// recount updates the registry's count after b's windows changed.
func (t *Throttle) recount(b *bucket) {
	m := b.memory()
	t.reg.held += m - b.mem
	t.held += m - b.mem
	b.mem = m
}

// growth is how much the buckets of existing throttles (live, or dormant and of the same key and
// policy) would grow if ds were declared: each gets a window for every limit that becomes
// effective. Windows of limits that stop applying are not subtracted (an over-estimate). want
// has each such throttle's growth.
func (r *Registry) growth(ds []Declaration) (need int64, want map[*Throttle]int64) {
	want = map[*Throttle]int64{}
	for _, d := range ds {
		t := r.throttles[d.Name]
		if t == nil {
			t = r.dormant[d.Name]
			if t == nil || !slices.Equal(t.key, d.Key) || t.policy != d.WhenKeyMissing {
				continue
			}
		}
		all := slices.AppendSeq(slices.Clone(d.Limits), maps.Keys(t.declared))
		var per int64
		added := 0
		for _, l := range effective(all) {
			if !slices.Contains(t.limits, l) {
				per += windowMemory(l)
				added++
			}
		}
		if added > 0 { // the windows themselves: at most as many more as were added
			per += allocSize(int64(len(t.limits)+added)*windowSize) - allocSize(int64(len(t.limits))*windowSize)
		}
		need += per * int64(len(t.buckets))
		want[t] += per * int64(len(t.buckets))
	}
	return need, want
}
