package storage

import (
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A WAL append that extends its file, or fills space that was preallocated but never written,
// makes its fdatasync commit file-system metadata as well as the data (on ext4 a journal commit
// for the new size or for the unwritten extent's conversion). That costs a third more than a sync
// of data over blocks already written (docs/benchmarks.md, run W), and a commit at light load pays
// it in full. Pebble overwrites such blocks when it recycles an old WAL, but a new one (the first
// after every start, and whenever no old one is free to recycle) grows.
//
// So a new WAL's space is written with zeros ahead of Pebble, by a goroutine of its own, and
// synced chunk by chunk: the commits' appends then overwrite blocks the file system already has. Zeros
// are what the preallocated space reads as anyway, and what Pebble and scanWAL take for the
// unwritten rest of a log. The filler never writes at or below Pebble's end of writes (Write
// waits for a zero chunk it would overlap), failing fills are given up silently (the appends
// grow the file as before), and it takes no more space than Pebble's preallocation does.
//
// Pebble's memtables start at 256 KiB and double up to MemTableSize, and a WAL holds about one
// memtable, so a WAL is filled to twice what the WAL before it holds (at least walFillMin, at
// most the most Pebble preallocates), not to the largest size every time; and not at all when
// the WAL before it was appended to faster than walFillBusy.

// walFillChunk is how much the filler writes (and syncs) at once; Pebble's Write waits at most
// for one. walFillMin is the fill of the first WAL after an open.
const (
	walFillChunk = 256 << 10
	walFillMin   = 1 << 20
)

var walZeros = make([]byte, walFillChunk)

// isWAL reports whether a file name is one of Pebble's WALs (NNNNNN.log).
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

// walFills sizes the fills of a store's WALs.
type walFills struct {
	max int64 // the most a WAL is filled to; 0: never fill
	// busy is the append rate (bytes per second over the previous WAL's life) from which a new
	// WAL is not filled: a store that busy shares its syncs among many commits, and zeros
	// written beside them would only slow their syncs down. 0: no limit.
	busy   float64
	mu     sync.Mutex
	latest *fillingWAL // the WAL created last
}

// walFillBusy is walFills.busy in production: a store appending one message at a time writes a few
// MiB per second to its WAL, a loaded one a hundred.
const walFillBusy = 32 << 20

// open wraps a WAL file just created or recycled (file wraps raw) and starts its fill. A
// recycled WAL is not filled: its old records are overwritten already, and filling what it
// lacks of a larger memtable's WAL (a recycled WAL of the first, small memtables) would write
// tens of MiB of zeros beside the commits of a busy store, whose syncs are shared anyway.
func (fs *walFills) open(file, raw vfs.File, recycled bool) vfs.File {
	w := &fillingWAL{File: file, raw: raw, opened: time.Now(), zeroing: -1, done: make(chan struct{})}
	w.cond.L = &w.mu
	fs.mu.Lock()
	target := int64(walFillMin)
	if prev := fs.latest; prev != nil {
		end := prev.end()
		target = max(target, 2*end)
		if secs := time.Since(prev.opened).Seconds(); fs.busy > 0 && float64(end) > fs.busy*secs {
			target = 0
		}
	}
	target = min(target, fs.max)
	fs.latest = w
	fs.mu.Unlock()
	st, err := raw.Stat()
	if recycled || err != nil || st.Size() >= target {
		close(w.done)
		return w
	}
	go w.fill(st.Size(), target)
	return w
}

// fillingWAL is a WAL file whose space is being zero-filled ahead of Pebble's writes.
type fillingWAL struct {
	vfs.File          // what Pebble writes through (the reserve's wrapper)
	raw      vfs.File // what the zeros are written to: a failed fill must not spend the reserve
	opened   time.Time

	mu         sync.Mutex
	cond       sync.Cond
	written    int64 // the end of Pebble's writes (its writes are sequential)
	zeroing    int64 // the start of the chunk being zero-filled, or -1
	zeroingEnd int64
	stopped    bool
	done       chan struct{} // closed when the filler has returned
}

// end is the end of Pebble's writes so far.
func (w *fillingWAL) end() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// fill writes zeros from from to to, chunk by chunk, above Pebble's writes, syncing each chunk:
// a commit's sync that comes during the fill writes out at most one chunk of zeros with its data.
func (w *fillingWAL) fill(from, to int64) {
	defer close(w.done)
	for {
		w.mu.Lock()
		start := max(from, w.written)
		if w.stopped || start >= to {
			w.mu.Unlock()
			break
		}
		end := min(start+walFillChunk, to)
		w.zeroing, w.zeroingEnd = start, end
		w.mu.Unlock()

		_, err := w.raw.WriteAt(walZeros[:end-start], start)

		w.mu.Lock()
		w.zeroing = -1
		w.cond.Broadcast()
		w.mu.Unlock()
		if err == nil {
			err = w.raw.SyncData()
		}
		if err != nil {
			return
		}
		from = end
	}
}

// Write appends p once no zero chunk being written overlaps it.
func (w *fillingWAL) Write(p []byte) (int, error) {
	w.mu.Lock()
	end := w.written + int64(len(p))
	for w.zeroing >= 0 && w.zeroing < end && w.zeroingEnd > w.written {
		w.cond.Wait()
	}
	w.written = end
	w.mu.Unlock()
	return w.File.Write(p)
}

// Close stops the filler, waits for it and closes the file.
func (w *fillingWAL) Close() error {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	<-w.done
	return w.File.Close()
}
