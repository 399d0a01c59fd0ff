package offheap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A scratch directory, on the data directory's disk, holds the files behind an Allocator's
// sweepable buffers. While one is open, each mapped sweepable buffer is a region of its own
// unnamed file there, mapped shared, its whole size reserved on disk when it is created: a disk
// too full to hold it makes it anonymous memory instead, so running out of space is a fallback at
// allocation, never a fault on a later write.
//
// Sweep drops the pages of every such region from the process's memory. They stay in the
// kernel's page cache, which writes them back to the file and may evict them when memory is
// short; the next access maps a page back (a minor fault, or a read if it was evicted). A
// standing backlog's records then cost page cache, which the kernel can reclaim, instead of RSS,
// which it cannot (there is no swap). Nothing is lost or reordered: a sweep is invisible to the
// queues, and the engine stays deterministic.
//
// The files are not part of durability: a restart rebuilds every queue from the queue log and its
// snapshot. They have no name (O_TMPFILE), so they vanish with the process; where the file
// system cannot make unnamed files each one is named and unlinked at once, and OpenScratch
// removes what a crash left between the two.
//
// Scratch files are made only on file systems that keep what fallocate reserves (ext4, XFS): on
// btrfs or ZFS (copy on write), a tmpfs (memory already) or a system without fallocate, a write
// to a full disk through a shared mapping would be a fault (SIGBUS), so OpenScratch refuses the
// directory and the records stay in anonymous memory. A region is not made where it would leave
// less than keepFree of the disk free (the store's reserve and room for its writes: a full disk is
// then met by the store, which answers StorageError, never by a region), nor past the
// Allocator's share of vm.max_map_count (mapshare.go).
//
// A region outlives the directory's Close (it is given back when its buffer is); Close only stops
// new ones.
type scratch struct {
	a        *Allocator
	dir      string
	keepFree int64
	spares   *spares // regions made ahead (spares.go)
	// makeMu makes the free-space check and the file's allocation one step: the maker of
	// spares and an allocation that found none make regions at the same time, and two checks
	// before either file took its blocks would both pass, leaving less than keepFree free.
	makeMu sync.Mutex
}

// scratchPrefix starts the name of every named scratch file (OpenScratch removes them).
const scratchPrefix = "region-"

// OpenScratch makes dir (if needed), removes the scratch files a crashed process left in it,
// checks that its file system keeps reserved space and that a region can be made there, and from
// then on makes sweepable buffers regions of files in dir, each leaving keepFree of the disk
// free. An Allocator has at most one scratch directory; Close closes it.
func (a *Allocator) OpenScratch(dir string, keepFree int64) error {
	a.mu.Lock()
	busy := a.scratch != nil || a.closed
	a.mu.Unlock()
	if busy {
		return errors.New("offheap: a scratch directory is open already, or the allocator is closed")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("offheap: scratch directory: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("offheap: scratch directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), scratchPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("offheap: stale scratch file: %w", err)
			}
		}
	}
	if err := a.checkReserves(dir); err != nil {
		return fmt.Errorf("offheap: scratch directory %s: %w", dir, err)
	}
	probe, err := a.mapFile(dir, os.Getpagesize())
	if err != nil {
		return fmt.Errorf("offheap: scratch directory %s: %w", dir, err)
	}
	unmapFile(probe)
	s := &scratch{a: a, dir: dir, keepFree: keepFree}
	s.spares = startSpares(s.makeRegion, a.unmapper.give)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.scratch != nil || a.closed {
		s.spares.close()
		return errors.New("offheap: a scratch directory is open already, or the allocator is closed")
	}
	a.scratch = s
	return nil
}

// makeRegion makes a region of n bytes in s's directory, within the mapping share and leaving
// keepFree of the disk free.
func (s *scratch) makeRegion(n int) ([]byte, error) {
	if !s.a.takeMapping(true) {
		return nil, errMapLimit
	}
	s.makeMu.Lock()
	defer s.makeMu.Unlock()
	free, err := s.a.freeSpace(s.dir)
	if err == nil && free-int64(n) < s.keepFree {
		err = fmt.Errorf("%w: %d bytes free, %d kept", errKeepFree, free, s.keepFree)
	}
	var b []byte
	if err == nil {
		b, err = s.a.mapFile(s.dir, n)
	}
	if err != nil {
		s.a.releaseMapping()
		return nil, err
	}
	return b, nil
}

// mapScratch maps n bytes as a region of a new file in the scratch directory, made ahead if one
// is ready; false when none is open or no region can be made (a fallback, counted).
func (a *Allocator) mapScratch(n int) ([]byte, bool) {
	a.mu.Lock()
	s := a.scratch
	a.mu.Unlock()
	if s == nil {
		return nil, false
	}
	b := s.spares.take(n)
	if b == nil {
		var err error
		if b, err = s.makeRegion(n); err != nil { // outside the lock: a sweep need not wait for the disk
			if errors.Is(err, errMapLimit) {
				a.fellBack(fallbackMapLimit, err)
			} else {
				a.fellBack(fallbackNoFile, err)
			}
			return nil, false
		}
	}
	a.mu.Lock()
	a.regions[addrOf(b)] = b
	a.mu.Unlock()
	a.scratchBytes.Add(int64(len(b)))
	return b, true
}

// regionUnmapper unmaps scratch regions on a goroutine of its own. Unmapping a region frees its
// unnamed file, and the file system's freeing of the reserved blocks costs 0.3–35 ms per region:
// on the queue's goroutine, the ack that drains a 10 M-message queue would stall it for seconds.
// A region handed over is out of the registry already (no sweep can reach it) and nothing uses
// it any more; until it is unmapped its addresses stay taken, so they cannot be reused early.
type regionUnmapper struct {
	mu      sync.Mutex
	cond    sync.Cond // signalled when pending grows, when the goroutine goes idle, and at stop
	pending [][]byte
	busy    bool // the goroutine is unmapping regions taken from pending
	started bool
	stopped bool          // give unmaps on the caller's goroutine
	done    chan struct{} // closed when the goroutine has returned
	unmap   func([]byte)  // unmapFile; tests hold it up
	release func()        // the Allocator's releaseMapping
}

func newRegionUnmapper(unmap func([]byte), release func()) *regionUnmapper {
	u := &regionUnmapper{unmap: unmap, release: release, done: make(chan struct{})}
	u.cond.L = &u.mu
	return u
}

// give queues b to be unmapped, starting the goroutine on first use; after stop it unmaps b at
// once.
func (u *regionUnmapper) give(b []byte) {
	u.mu.Lock()
	if u.stopped {
		unmap := u.unmap
		u.mu.Unlock()
		unmap(b)
		u.release()
		return
	}
	if !u.started {
		u.started = true
		go u.loop()
	}
	u.pending = append(u.pending, b)
	u.mu.Unlock()
	u.cond.Broadcast()
}

func (u *regionUnmapper) loop() {
	defer close(u.done)
	var batch [][]byte
	for {
		u.mu.Lock()
		for len(u.pending) == 0 && !u.stopped {
			u.busy = false
			u.cond.Broadcast()
			u.cond.Wait()
		}
		if len(u.pending) == 0 {
			u.busy = false
			u.cond.Broadcast()
			u.mu.Unlock()
			return
		}
		batch, u.pending = u.pending, batch[:0]
		u.busy = true
		unmap := u.unmap
		u.mu.Unlock()
		for i, b := range batch {
			unmap(b)
			u.release()
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

// stop unmaps what is pending, ends the goroutine and has give unmap from then on.
func (u *regionUnmapper) stop() {
	u.mu.Lock()
	u.stopped = true
	started := u.started
	u.mu.Unlock()
	u.cond.Broadcast()
	if started {
		<-u.done
	}
}

// Sweep drops the pages of every scratch region from the process's memory (see scratch) and
// returns the bytes of the regions it swept. It may run at any time on any goroutine, beside the
// goroutines driving queues; the server runs it about once a second. Anonymous memory is never
// swept (dropping its pages would zero them).
func (a *Allocator) Sweep() int64 {
	var swept int64
	a.eachRegion(func(r []byte) {
		dropPages(r)
		swept += int64(len(r))
	})
	return swept
}

// eachRegion calls fn for every scratch region, holding mu for one region at a time (a sweep
// must not advise memory given back), so that a free waits for one call at most; fn must not
// keep r.
func (a *Allocator) eachRegion(fn func(r []byte)) {
	a.sweepMu.Lock()
	defer a.sweepMu.Unlock()
	a.mu.Lock()
	addrs := a.addrs[:0]
	for addr := range a.regions {
		addrs = append(addrs, addr)
	}
	a.mu.Unlock()
	for _, addr := range addrs {
		a.mu.Lock()
		if r, ok := a.regions[addr]; ok {
			fn(r)
		}
		a.mu.Unlock()
	}
	a.addrs = addrs[:0]
}
