package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// useScratch opens a scratch directory in t.TempDir() for the test; with small set, every buffer
// of 1 KiB or more is mapped (so short test queues use scratch regions too).
func useScratch(t testing.TB, small bool) *Scratch {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("scratch regions are made on Linux only")
	}
	s, err := OpenScratch(filepath.Join(t.TempDir(), "scratch"), ScratchOptions{})
	if errors.Is(err, errNoReserve) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if small {
		old := mapMin
		mapMin = 1 << 10
		t.Cleanup(func() { mapMin = old })
	}
	return s
}

// regionResidency returns the bytes of region r in the process and in the page cache.
func regionResidency(r []rec) (resident, cached int64) {
	p := openResidency()
	defer p.close()
	return p.count(unsafeBytes(r))
}

// A sweep takes a full chunk's pages out of the process (they stay in the page cache), and every
// record reads back as written, before and after new writes.
func TestSweepDropsResidentPages(t *testing.T) {
	useScratch(t, false)
	s := newSlab()
	n := uint32(2 * chunkSize)
	for i := range n {
		s.at(s.alloc()).id = mid(uint64(i))
	}
	if !s.mapped[1] || !isScratch(s.chunks[1]) {
		t.Fatal("a full chunk is not a scratch region")
	}
	size := int64(chunkSize * recSize)
	if res, cached := regionResidency(s.chunks[1]); res != size || cached != size {
		t.Fatalf("a chunk just written: %d bytes resident, %d cached, want %d", res, cached, size)
	}
	if swept := Sweep(); swept < 2*size {
		t.Fatalf("the sweep covered %d bytes, want at least the two chunks (%d)", swept, 2*size)
	}
	if res, cached := regionResidency(s.chunks[1]); res != 0 || cached != size {
		t.Fatalf("a swept chunk: %d bytes resident, want 0; %d cached, want %d", res, cached, size)
	}
	for i := range n {
		if got := s.at(i).id; got != mid(uint64(i)) {
			t.Fatalf("slot %d reads %v after the sweep, want %v", i, got, mid(uint64(i)))
		}
	}
	for i := range n {
		s.at(i).attempts = i
	}
	Sweep()
	for i := range n {
		if r := s.at(i); r.id != mid(uint64(i)) || r.attempts != i {
			t.Fatalf("slot %d reads %v/%d after a second sweep", i, r.id, r.attempts)
		}
	}
	st := ReadMappedStats()
	if st.Scratch < 2*size || st.Cached < 2*size {
		t.Fatalf("stats %+v: want at least %d bytes of scratch, all cached", st, 2*size)
	}
	s.unmap()
}

// isScratch reports whether b is a registered scratch region.
func isScratch[T any](b []T) bool {
	pager.mu.Lock()
	defer pager.mu.Unlock()
	_, ok := pager.regions[addrOf(unsafeBytes(b))]
	return ok
}

// OpenScratch removes the named files a crashed process left, and nothing else.
func TestScratchRemovesStaleFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("scratch regions are made on Linux only")
	}
	dir := t.TempDir()
	stale, other := filepath.Join(dir, scratchPrefix+"123-4"), filepath.Join(dir, "notes.txt")
	for _, f := range []string{stale, other} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := OpenScratch(dir, ScratchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale scratch file is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not scratch was removed: %v", err)
	}
}

// When the disk cannot hold a region, a sweepable buffer is anonymous memory (which no sweep
// touches), and a directory where none can be made is refused at OpenScratch.
func TestScratchFullDiskFallsBack(t *testing.T) {
	useScratch(t, false)
	setReserve(t, func(int, int64) error { return errors.New("no space left on device") })
	if _, err := OpenScratch(t.TempDir(), ScratchOptions{}); err == nil {
		t.Fatal("OpenScratch accepted a directory where no region can be reserved")
	}
	ch := allocFallback(t)
	for i := range ch {
		ch[i].attempts = uint32(i) + 1
	}
	Sweep()
	for i := range ch {
		if ch[i].attempts != uint32(i)+1 {
			t.Fatalf("record %d of an anonymous buffer changed by a sweep: %d", i, ch[i].attempts)
		}
	}
	freeMapped(ch, true)
}

// Sweeps running beside allocation, writes and frees (as the server's sweeper runs beside the
// queues) never lose a write nor touch memory that was given back; run with -race.
func TestSweepRacesFree(t *testing.T) {
	useScratch(t, false)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				Sweep()
			}
		}
	}()
	keep, keepMapped := allocSweepable[rec](chunkSize)
	for round := range 300 {
		ch, isMapped := allocSweepable[rec](chunkSize)
		for i := range ch {
			ch[i].attempts = uint32(round)
			keep[i].attempts++
		}
		for i := range ch {
			if ch[i].attempts != uint32(round) || keep[i].attempts != uint32(round)+1 {
				t.Fatalf("round %d record %d: %d and %d", round, i, ch[i].attempts, keep[i].attempts)
			}
		}
		freeMapped(ch, isMapped)
		// Anonymous memory mapped now often takes the address just given back: a sweep that
		// advised it would zero it.
		anon, anonMapped := allocMapped[rec](chunkSize)
		for i := range anon {
			anon[i].attempts = uint32(round) + 1
		}
		for i := range anon {
			if anon[i].attempts != uint32(round)+1 {
				t.Fatalf("round %d: anonymous record %d reads %d", round, i, anon[i].attempts)
			}
		}
		freeMapped(anon, anonMapped)
	}
	close(stop)
	wg.Wait()
	freeMapped(keep, keepMapped)
}

// The twin comparison with every buffer of 1 KiB or more a scratch region and sweeps drawn
// between the commands.
func TestDispatchMatchesNaiveTwinSwept(t *testing.T) {
	useScratch(t, true)
	var swept int64
	checkTwin(t, map[string]func(*rapid.T){"sweep": func(*rapid.T) { swept += Sweep() }})
	if swept == 0 {
		t.Fatal("no sweep met a scratch region")
	}
}

// The random operations' properties, likewise swept between commands.
func TestPropertyRandomOperationsSwept(t *testing.T) {
	useScratch(t, true)
	var swept int64
	rapid.Check(t, func(t *rapid.T) {
		s := newSim(t)
		actions := s.actions()
		actions["sweep"] = func(*rapid.T) { swept += Sweep() }
		for range 5 {
			t.Repeat(actions)
		}
		s.checkReplay(t)
	})
	if swept == 0 {
		t.Fatal("no sweep met a scratch region")
	}
}

// BenchmarkSweep: one sweep over the record chunks of 10 M messages (1,221 chunks of 512 KiB):
// untouched since the sweep before, or with one page per chunk touched (a standing backlog whose
// heads are spread over every chunk: the worst case).
func BenchmarkSweep(b *testing.B) {
	for _, touched := range []bool{false, true} {
		b.Run(fmt.Sprintf("touched=%v", touched), func(b *testing.B) {
			useScratch(b, false)
			chunks := make([][]rec, (10_000_000+chunkSize-1)/chunkSize)
			for i := range chunks {
				chunks[i], _ = allocSweepable[rec](chunkSize)
			}
			b.Cleanup(func() {
				for _, ch := range chunks {
					freeMapped(ch, true)
				}
			})
			Sweep()
			for b.Loop() {
				if touched {
					for _, ch := range chunks {
						ch[0].attempts++
					}
				}
				Sweep()
			}
		})
	}
}

// scratchMappings counts the process's mappings of files in dir (/proc/self/maps names an
// unnamed file by its directory).
func scratchMappings(t *testing.T, dir string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	return strings.Count(string(maps), dir+"/")
}

// A region given back is unmapped: its mapping (and with it the file and its reserved space) is
// gone, also for the region OpenScratch makes to check the directory.
func TestFreedRegionIsUnmapped(t *testing.T) {
	s := useScratch(t, false)
	if n := scratchMappings(t, s.dir); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after OpenScratch, want 0", n)
	}
	var chunks [][]rec
	for range 4 {
		ch, isMapped := allocSweepable[rec](chunkSize)
		if !isMapped || !isScratch(ch) {
			t.Fatal("a full chunk is not a scratch region")
		}
		chunks = append(chunks, ch)
	}
	if n := regionsInUse(t, s); n != len(chunks) {
		t.Fatalf("%d mappings of the scratch directory beside those made ahead, want %d", n, len(chunks))
	}
	for _, ch := range chunks {
		freeMapped(ch, true)
	}
	if n := regionsInUse(t, s); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after every region was given back, want 0", n)
	}
}

// A Queue nobody holds any more (a hibernated or deleted queue) gives its scratch regions back
// once collected, also while sweeps run beside it.
func TestDroppedQueueGivesRegionsBack(t *testing.T) {
	s := useScratch(t, false)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				Sweep()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	func() {
		q := newTestQueue(t, DefaultConfig())
		for b := range uint64(4) {
			msgs := make([]Message, chunkSize/2)
			for i := range msgs {
				msgs[i] = msg(b*chunkSize/2+uint64(i)+1, "k", 1)
			}
			enqueue(t, q, 1, msgs...)
		}
		if n := regionsInUse(t, s); n == 0 {
			t.Fatalf("a queue of %d messages has no scratch region", q.Len())
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for n := regionsInUse(t, s); n > 0; n = regionsInUse(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("%d scratch regions still mapped after the queue was collected", n)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// When the scratch directory disappears under a running server, the regions made there stay
// valid and swept, and new sweepable buffers become anonymous memory (counted as fallbacks).
func TestScratchDirectoryRemovedFallsBack(t *testing.T) {
	s := useScratch(t, false)
	old, oldMapped := allocSweepable[rec](chunkSize)
	if !isScratch(old) {
		t.Fatal("a full chunk is not a scratch region")
	}
	for i := range old {
		old[i].attempts = uint32(i) + 1
	}
	if err := os.RemoveAll(s.dir); err != nil {
		t.Fatal(err)
	}
	dropSpares(s) // a region made ahead outlives its directory (its file has no name); make anew
	ch := allocFallback(t)
	for i := range ch {
		ch[i].attempts = uint32(i) + 2
	}
	Sweep()
	for i := range old {
		if old[i].attempts != uint32(i)+1 || ch[i].attempts != uint32(i)+2 {
			t.Fatalf("record %d after a sweep: %d and %d", i, old[i].attempts, ch[i].attempts)
		}
	}
	freeMapped(ch, true)
	freeMapped(old, oldMapped)
}

// Giving regions back does not wait for the file system to free them: the unmapping happens on
// the unmapper's goroutine, so a Queue that frees many chunks at once (a drained backlog) is not
// held up. Until then the regions are out of the registry, and no sweep reaches them.
func TestFreeingRegionsDoesNotWaitForTheUnmap(t *testing.T) {
	s := useScratch(t, false)
	var chunks [][]rec
	for range 8 {
		ch, isMapped := allocSweepable[rec](chunkSize)
		if !isMapped || !isScratch(ch) {
			t.Fatal("a full chunk is not a scratch region")
		}
		ch[0].id[0] = 1
		chunks = append(chunks, ch)
	}
	release := make(chan struct{})
	unmapper.wait()
	unmapper.mu.Lock()
	unmapper.unmap = func(b []byte) { <-release; unmapFile(b) } // a file system that takes its time
	unmapper.mu.Unlock()
	t.Cleanup(func() {
		unmapper.mu.Lock()
		unmapper.unmap = unmapFile
		unmapper.mu.Unlock()
	})
	for _, ch := range chunks { // would block here if freeing waited for the unmap
		freeMapped(ch, true)
	}
	// Earlier tests' regions may still be registered (their buffers not yet collected): a
	// sweep's total says nothing about these; look for these regions among those swept.
	given := map[uintptr]bool{}
	for _, ch := range chunks {
		given[addrOf(unsafeBytes(ch))] = true
	}
	eachRegion(func(r []byte) {
		if given[addrOf(r)] {
			t.Errorf("a sweep reached a region given back (%d bytes at %#x)", len(r), addrOf(r))
		}
	})
	close(release)
	if n := regionsInUse(t, s); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after the unmapper ran, want 0", n)
	}
}

// allocFallback allocates a full sweepable chunk where no scratch region can be made, and checks
// that it is anonymous mapped memory, counted as one fallback.
func allocFallback(t *testing.T) []rec {
	t.Helper()
	before := ReadMappedStats()
	ch, isMapped := allocSweepable[rec](chunkSize)
	if !isMapped || isScratch(ch) {
		t.Fatalf("mapped %v, scratch %v: want anonymous mapped memory", isMapped, isScratch(ch))
	}
	if got := ReadMappedStats().Fallbacks - before.Fallbacks; got != 1 {
		t.Fatalf("%d fallbacks counted, want 1", got)
	}
	return ch
}

// regionsInUse counts the mappings of s's directory that are not regions made ahead, once the
// maker and the unmapper are done.
func regionsInUse(t *testing.T, s *Scratch) int {
	t.Helper()
	s.spares.wait()
	unmapper.wait()
	return scratchMappings(t, s.dir) - s.spares.count()
}

// dropSpares gives back the regions made ahead, so that the next allocation makes its own.
func dropSpares(s *Scratch) {
	p := s.spares
	p.wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, b := range p.ready {
		delete(p.ready, n)
		unmapper.give(b)
	}
}

// setReserve replaces the reservation of a region's space for the test, while no region is being
// made ahead (the maker reads it too).
func setReserve(t *testing.T, fn func(fd int, size int64) error) {
	t.Helper()
	waitMakers()
	old := reserve
	reserve = fn
	t.Cleanup(func() { waitMakers(); reserve = old })
}

// waitMakers waits until every open Scratch's maker is idle.
func waitMakers() {
	pager.mu.Lock()
	open := slices.Clone(pager.open)
	pager.mu.Unlock()
	for _, s := range open {
		s.spares.wait()
	}
}
