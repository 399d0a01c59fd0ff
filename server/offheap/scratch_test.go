package offheap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// A sweep takes a full chunk's pages out of the process (they stay in the page cache), and every
// record reads back as written, before and after new writes.
func TestSweepDropsResidentPages(t *testing.T) {
	a, _ := useScratch(t, false)
	var chunks [][]rec
	for range 2 {
		ch, isMapped := allocRecs(a, chunkSize, true)
		if !isMapped || !isScratch(a, ch) {
			t.Fatal("a full chunk is not a scratch region")
		}
		chunks = append(chunks, ch)
	}
	for c, ch := range chunks {
		for i := range ch {
			ch[i].id[0], ch[i].id[1] = byte(c), byte(i)
		}
	}
	size := int64(chunkSize * recSize)
	if res, cached := Residency(recBytes(chunks[1])); res != size || cached != size {
		t.Fatalf("a chunk just written: %d bytes resident, %d cached, want %d", res, cached, size)
	}
	if swept := a.Sweep(); swept != 2*size {
		t.Fatalf("the sweep covered %d bytes, want the two chunks (%d)", swept, 2*size)
	}
	if res, cached := Residency(recBytes(chunks[1])); res != 0 || cached != size {
		t.Fatalf("a swept chunk: %d bytes resident, want 0; %d cached, want %d", res, cached, size)
	}
	for c, ch := range chunks {
		for i := range ch {
			if ch[i].id[0] != byte(c) || ch[i].id[1] != byte(i) {
				t.Fatalf("chunk %d record %d reads %v after the sweep", c, i, ch[i].id)
			}
			ch[i].attempts = uint32(i)
		}
	}
	a.Sweep()
	for c, ch := range chunks {
		for i := range ch {
			if ch[i].id[0] != byte(c) || ch[i].id[1] != byte(i) || ch[i].attempts != uint32(i) {
				t.Fatalf("chunk %d record %d reads %v/%d after a second sweep", c, i, ch[i].id, ch[i].attempts)
			}
		}
	}
	st := a.Stats()
	if st.Scratch != 2*size || st.Cached != 2*size || st.Mapped != 2*size {
		t.Fatalf("stats %+v: want %d bytes mapped, all scratch, all cached", st, 2*size)
	}
	for _, ch := range chunks {
		freeRecs(a, ch, true)
	}
	if st := a.Stats(); st.Mapped != 0 || st.Scratch != 0 {
		t.Fatalf("stats %+v after every chunk was given back", st)
	}
}

// Buffers below MinSize are left to the Go heap; above it they are mapped, and counted.
func TestSmallBuffersStayOnTheHeap(t *testing.T) {
	a := New(Options{})
	defer a.Close()
	if b := a.Alloc(DefaultMinSize-1, false); b != nil {
		t.Fatalf("a buffer below MinSize was mapped (%d bytes)", len(b))
	}
	b := a.Alloc(DefaultMinSize, false)
	if runtime.GOOS != "linux" {
		if b != nil {
			a.Free(b)
		}
		return
	}
	if len(b) != DefaultMinSize {
		t.Fatalf("Alloc(%d) returned %d bytes", DefaultMinSize, len(b))
	}
	if st := a.Stats(); st.Mapped != DefaultMinSize || st.Scratch != 0 || st.Mappings != 1 {
		t.Fatalf("stats %+v after one anonymous buffer", st)
	}
	a.Free(b)
	if st := a.Stats(); st.Mapped != 0 || st.Mappings != 0 {
		t.Fatalf("stats %+v after it was given back", st)
	}
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
	a := New(Options{})
	defer a.Close()
	if err := a.OpenScratch(dir, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale scratch file is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not scratch was removed: %v", err)
	}
	if err := a.OpenScratch(t.TempDir(), 0); err == nil {
		t.Fatal("a second scratch directory was opened")
	}
}

// When the disk cannot hold a region, a sweepable buffer is anonymous memory (which no sweep
// touches), and a directory where none can be made is refused at OpenScratch.
func TestScratchFullDiskFallsBack(t *testing.T) {
	a, _ := useScratch(t, false)
	setReserve(t, a, func(int, int64) error { return errors.New("no space left on device") })
	other := New(Options{})
	defer other.Close()
	other.reserve = a.reserve
	if err := other.OpenScratch(t.TempDir(), 0); err == nil {
		t.Fatal("OpenScratch accepted a directory where no region can be reserved")
	}
	dropSpares(a)
	ch := allocFallback(t, a)
	for i := range ch {
		ch[i].attempts = uint32(i) + 1
	}
	a.Sweep()
	for i := range ch {
		if ch[i].attempts != uint32(i)+1 {
			t.Fatalf("record %d of an anonymous buffer changed by a sweep: %d", i, ch[i].attempts)
		}
	}
	freeRecs(a, ch, true)
}

// Sweeps running beside allocation, writes and frees (as the server's sweeper runs beside the
// queues) never lose a write nor touch memory that was given back; run with -race.
func TestSweepRacesFree(t *testing.T) {
	a, _ := useScratch(t, false)
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
				a.Sweep()
			}
		}
	}()
	keep, keepMapped := allocRecs(a, chunkSize, true)
	for round := range 300 {
		ch, isMapped := allocRecs(a, chunkSize, true)
		for i := range ch {
			ch[i].attempts = uint32(round)
			keep[i].attempts++
		}
		for i := range ch {
			if ch[i].attempts != uint32(round) || keep[i].attempts != uint32(round)+1 {
				t.Fatalf("round %d record %d: %d and %d", round, i, ch[i].attempts, keep[i].attempts)
			}
		}
		freeRecs(a, ch, isMapped)
		// Anonymous memory mapped now often takes the address just given back: a sweep that
		// advised it would zero it.
		anon, anonMapped := allocRecs(a, chunkSize, false)
		for i := range anon {
			anon[i].attempts = uint32(round) + 1
		}
		for i := range anon {
			if anon[i].attempts != uint32(round)+1 {
				t.Fatalf("round %d: anonymous record %d reads %d", round, i, anon[i].attempts)
			}
		}
		freeRecs(a, anon, anonMapped)
	}
	close(stop)
	wg.Wait()
	freeRecs(a, keep, keepMapped)
}

// BenchmarkSweep: one sweep over the record chunks of 10 M messages (1,221 chunks of 512 KiB):
// untouched since the sweep before, or with one page per chunk touched (a standing backlog whose
// heads are spread over every chunk: the worst case).
func BenchmarkSweep(b *testing.B) {
	for _, touched := range []bool{false, true} {
		b.Run(fmt.Sprintf("touched=%v", touched), func(b *testing.B) {
			a, _ := useScratch(b, false)
			chunks := make([][]rec, (10_000_000+chunkSize-1)/chunkSize)
			for i := range chunks {
				chunks[i], _ = allocRecs(a, chunkSize, true)
			}
			b.Cleanup(func() {
				for _, ch := range chunks {
					freeRecs(a, ch, true)
				}
			})
			a.Sweep()
			for b.Loop() {
				if touched {
					for _, ch := range chunks {
						ch[0].attempts++
					}
				}
				a.Sweep()
			}
		})
	}
}

// A region given back is unmapped: its mapping (and with it the file and its reserved space) is
// gone, also for the region OpenScratch makes to check the directory.
func TestFreedRegionIsUnmapped(t *testing.T) {
	a, dir := useScratch(t, false)
	if n := scratchMappings(t, dir); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after OpenScratch, want 0", n)
	}
	var chunks [][]rec
	for range 4 {
		ch, isMapped := allocRecs(a, chunkSize, true)
		if !isMapped || !isScratch(a, ch) {
			t.Fatal("a full chunk is not a scratch region")
		}
		chunks = append(chunks, ch)
	}
	if n := regionsInUse(t, a); n != len(chunks) {
		t.Fatalf("%d mappings of the scratch directory beside those made ahead, want %d", n, len(chunks))
	}
	for _, ch := range chunks {
		freeRecs(a, ch, true)
	}
	if n := regionsInUse(t, a); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after every region was given back, want 0", n)
	}
}

// When the scratch directory disappears under a running server, the regions made there stay
// valid and swept, and new sweepable buffers become anonymous memory (counted as fallbacks).
func TestScratchDirectoryRemovedFallsBack(t *testing.T) {
	a, dir := useScratch(t, false)
	old, oldMapped := allocRecs(a, chunkSize, true)
	if !isScratch(a, old) {
		t.Fatal("a full chunk is not a scratch region")
	}
	for i := range old {
		old[i].attempts = uint32(i) + 1
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	dropSpares(a) // a region made ahead outlives its directory (its file has no name); make anew
	ch := allocFallback(t, a)
	for i := range ch {
		ch[i].attempts = uint32(i) + 2
	}
	a.Sweep()
	for i := range old {
		if old[i].attempts != uint32(i)+1 || ch[i].attempts != uint32(i)+2 {
			t.Fatalf("record %d after a sweep: %d and %d", i, old[i].attempts, ch[i].attempts)
		}
	}
	freeRecs(a, ch, true)
	freeRecs(a, old, oldMapped)
}

// Giving regions back does not wait for the file system to free them: the unmapping happens on
// the unmapper's goroutine, so a queue that frees many chunks at once (a drained backlog) is not
// held up. Until then the regions are out of the registry, and no sweep reaches them.
func TestFreeingRegionsDoesNotWaitForTheUnmap(t *testing.T) {
	a, _ := useScratch(t, false)
	var chunks [][]rec
	for range 8 {
		ch, isMapped := allocRecs(a, chunkSize, true)
		if !isMapped || !isScratch(a, ch) {
			t.Fatal("a full chunk is not a scratch region")
		}
		ch[0].id[0] = 1
		chunks = append(chunks, ch)
	}
	release := make(chan struct{})
	u := a.unmapper
	u.wait()
	u.mu.Lock()
	u.unmap = func(b []byte) { <-release; unmapFile(b) } // a file system that takes its time
	u.mu.Unlock()
	t.Cleanup(func() {
		u.mu.Lock()
		u.unmap = unmapFile
		u.mu.Unlock()
	})
	for _, ch := range chunks { // would block here if freeing waited for the unmap
		freeRecs(a, ch, true)
	}
	given := map[uintptr]bool{}
	for _, ch := range chunks {
		given[addrOf(recBytes(ch))] = true
	}
	a.eachRegion(func(r []byte) {
		if given[addrOf(r)] {
			t.Errorf("a sweep reached a region given back (%d bytes at %#x)", len(r), addrOf(r))
		}
	})
	close(release)
	if n := regionsInUse(t, a); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after the unmapper ran, want 0", n)
	}
}

// Close gives back the regions made ahead and ends the goroutines; a buffer still in use stays
// valid and is unmapped when it is given back afterwards.
func TestCloseKeepsBuffersInUse(t *testing.T) {
	a, dir := useScratch(t, false)
	ch, _ := allocRecs(a, chunkSize, true)
	if !isScratch(a, ch) {
		t.Fatal("a full chunk is not a scratch region")
	}
	for i := range ch {
		ch[i].attempts = uint32(i)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err == nil {
		t.Fatal("a second Close succeeded")
	}
	if n := scratchMappings(t, dir); n != 1 {
		t.Fatalf("%d mappings of the scratch directory after Close, want the one in use", n)
	}
	for i := range ch {
		if ch[i].attempts != uint32(i) {
			t.Fatalf("record %d reads %d after Close", i, ch[i].attempts)
		}
	}
	after, afterMapped := allocRecs(a, chunkSize, true)
	if !afterMapped || isScratch(a, after) {
		t.Fatal("a chunk allocated after Close is not anonymous memory")
	}
	freeRecs(a, after, afterMapped)
	freeRecs(a, ch, true)
	if n := scratchMappings(t, dir); n != 0 {
		t.Fatalf("%d mappings of the scratch directory once the region was given back after Close", n)
	}
	if st := a.Stats(); st.Mapped != 0 || st.Mappings != 0 {
		t.Fatalf("stats %+v after everything was given back", st)
	}
}
