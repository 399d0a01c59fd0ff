//go:build linux

package offheap

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filamq/fila/server/internal/testdisk"
)

// Near vm.max_map_count the Allocator keeps its mappings to their share: past the scratch share
// a chunk is anonymous memory, past the Allocator's share the Go heap; each counted, logged once,
// and every record still reads back. Once mappings are given back, chunks are regions again.
func TestMapLimitFallsBack(t *testing.T) {
	var logs bytes.Buffer
	a := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer a.Close()
	dir := filepath.Join(t.TempDir(), "scratch")
	if err := a.OpenScratch(dir, 0); errors.Is(err, ErrNoReserve) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	dropSpares(a)
	a.unmapper.wait()
	base := a.mappings.Load()
	limit := 2 * (base + 3) // room for three more scratch regions, and a few anonymous buffers
	setMapLimit(a, limit)
	type chunk struct {
		recs   []rec
		mapped bool
	}
	var chunks []chunk
	var scratch, anon, heap int
	for heap == 0 {
		if len(chunks) > 1000 {
			t.Fatal("chunks never fell back to the Go heap")
		}
		ch, isMapped := allocRecs(a, chunkSize, true)
		switch {
		case isScratch(a, ch):
			scratch++
		case isMapped:
			anon++
		default:
			heap++
		}
		if n := a.mappings.Load(); n > limit*mapShareNum/mapShareDen {
			t.Fatalf("%d mappings, past the share %d of a limit of %d", n, limit*mapShareNum/mapShareDen, limit)
		}
		if n := scratchMappings(t, dir); int64(n) > limit/scratchShare {
			t.Fatalf("%d scratch mappings in the process, past the share %d of a limit of %d", n, limit/scratchShare, limit)
		}
		for i := range ch {
			ch[i].attempts = uint32(len(chunks))
		}
		chunks = append(chunks, chunk{ch, isMapped})
	}
	if scratch == 0 || anon == 0 {
		t.Fatalf("%d scratch regions, %d anonymous, %d on the heap: want some of each", scratch, anon, heap)
	}
	if got := a.Stats().MapLimitFallbacks; got < int64(anon+heap) {
		t.Fatalf("%d map-limit fallbacks counted, want at least %d", got, anon+heap)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("the map limit was logged %d times, want once:\n%s", n, &logs)
	}
	for j, c := range chunks {
		for i := range c.recs {
			if c.recs[i].attempts != uint32(j) {
				t.Fatalf("chunk %d record %d reads %d", j, i, c.recs[i].attempts)
			}
		}
		freeRecs(a, c.recs, c.mapped)
	}
	a.unmapper.wait()
	ch, isMapped := allocRecs(a, chunkSize, true)
	if !isScratch(a, ch) {
		t.Fatal("a chunk is not a scratch region once the mappings were given back")
	}
	freeRecs(a, ch, isMapped)
}

// Scratch files are refused on file systems that do not keep what fallocate reserves (a write
// to a full disk through the mapping would be a SIGBUS), and on a tmpfs (memory already).
func TestScratchRefusesFileSystemsWithoutReserve(t *testing.T) {
	t.Run("tmpfs", func(t *testing.T) {
		a := New(Options{})
		defer a.Close()
		err := a.OpenScratch(filepath.Join(testdisk.Tmpfs(t, 4), "scratch"), 0)
		if !errors.Is(err, ErrNoReserve) || !strings.Contains(err.Error(), "tmpfs") {
			t.Fatalf("OpenScratch on a tmpfs: %v", err)
		}
	})
	t.Run("ext4", func(t *testing.T) {
		a := New(Options{})
		defer a.Close()
		if err := a.OpenScratch(filepath.Join(testdisk.Ext4(t, 8), "scratch"), 0); err != nil {
			t.Fatalf("OpenScratch on ext4: %v", err)
		}
	})
	t.Run("no fallocate", func(t *testing.T) {
		a := New(Options{})
		defer a.Close()
		setReserve(t, a, func(int, int64) error { return syscall.EOPNOTSUPP })
		if err := a.OpenScratch(t.TempDir(), 0); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Fatalf("OpenScratch without fallocate: %v", err)
		}
	})
	for magic, name := range map[int64]string{0x9123683E: "btrfs", 0x2FC12FC1: "zfs", 0x12345678: "0x12345678"} {
		t.Run(name, func(t *testing.T) {
			a := New(Options{})
			defer a.Close()
			setStatFS(t, a, func(string) (int64, int64, error) { return magic, 1 << 40, nil })
			err := a.OpenScratch(t.TempDir(), 0)
			if !errors.Is(err, ErrNoReserve) || !strings.Contains(err.Error(), name) {
				t.Fatalf("OpenScratch on %s: %v", name, err)
			}
		})
	}
}

// Regions leave keepFree of a real disk free (the store's reserve), a chunk past it is anonymous
// memory, and when another writer fills the disk the regions made before are still written to
// in full without a fault: their blocks were reserved when they were made.
func TestScratchKeepsFreeSpaceForTheStore(t *testing.T) {
	disk := testdisk.Ext4(t, 32)
	const keep = 12 << 20
	a := New(Options{})
	defer a.Close()
	if err := a.OpenScratch(filepath.Join(disk, "scratch"), keep); err != nil {
		t.Fatal(err)
	}
	var regions [][]rec
	for {
		if len(regions) > 100 {
			t.Fatal("regions never stopped at the space kept free")
		}
		ch, isMapped := allocRecs(a, chunkSize, true)
		if !isScratch(a, ch) {
			if !isMapped {
				t.Fatal("a chunk past the space kept free is not mapped")
			}
			freeRecs(a, ch, isMapped)
			break
		}
		regions = append(regions, ch)
	}
	a.scratch.spares.wait()
	if len(regions) < 4 {
		t.Fatalf("%d regions made on a disk of 32 MiB keeping %d MiB", len(regions), keep>>20)
	}
	if free := testdisk.Free(t, disk); free < keep {
		t.Fatalf("%d bytes free after the regions, want at least the %d kept", free, keep)
	}
	if got := a.Stats().Fallbacks; got != 1 {
		t.Fatalf("%d fallbacks counted, want 1", got)
	}
	testdisk.Fill(t, filepath.Join(disk, "filler"))
	for j, ch := range regions { // untouched until now: a hole here would fault on the full disk
		for i := range ch {
			ch[i].attempts = uint32(j + i)
		}
	}
	a.Sweep()
	for j, ch := range regions {
		for i := range ch {
			if ch[i].attempts != uint32(j+i) {
				t.Fatalf("region %d record %d reads %d", j, i, ch[i].attempts)
			}
		}
		freeRecs(a, ch, true)
	}
}

// A full chunk's region is made ahead, off the queue's goroutine: the chunk after the first of
// its size takes it without touching the file system (here one that would refuse), and the maker,
// refused, makes nothing more until asked again. Close gives back what was made ahead.
func TestRegionsAreMadeAhead(t *testing.T) {
	a, dir := useScratch(t, false)
	s := a.scratch
	dropSpares(a)
	first, _ := allocRecs(a, chunkSize, true) // none ready: made here, and one asked for
	s.spares.wait()
	s.spares.mu.Lock()
	ahead := s.spares.ready[chunkSize*recSize]
	s.spares.mu.Unlock()
	if ahead == nil {
		t.Fatal("no region made ahead after a chunk of its size")
	}
	setReserve(t, a, func(int, int64) error { return errors.New("the file system refuses") })
	second, _ := allocRecs(a, chunkSize, true)
	if !isScratch(a, second) || addrOf(recBytes(second)) != addrOf(ahead) {
		t.Fatal("the second chunk is not the region made ahead")
	}
	s.spares.wait()
	if n := s.spares.count(); n != 0 {
		t.Fatalf("%d regions made ahead by a file system that refuses", n)
	}
	for i := range second {
		if second[i] != (rec{}) {
			t.Fatalf("record %d of a region made ahead is not zero", i)
		}
	}
	freeRecs(a, first, true)
	freeRecs(a, second, true)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := scratchMappings(t, dir); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after Close, want 0", n)
	}
}

// BenchmarkChunkRegion: the time a queue's goroutine spends getting a full chunk's scratch region,
// made there (ahead=false) or taken from the region made ahead (ahead=true). Giving the region
// back and the maker's work are outside the timing.
func BenchmarkChunkRegion(b *testing.B) {
	for _, ahead := range []bool{false, true} {
		b.Run("ahead="+map[bool]string{false: "false", true: "true"}[ahead], func(b *testing.B) {
			a, _ := useScratch(b, false)
			for range b.N {
				b.StopTimer()
				if ahead {
					a.scratch.spares.wait()
				} else {
					dropSpares(a)
				}
				a.unmapper.wait()
				b.StartTimer()
				ch, isMapped := allocRecs(a, chunkSize, true)
				b.StopTimer()
				if !isScratch(a, ch) {
					b.Fatal("not a scratch region")
				}
				freeRecs(a, ch, isMapped)
				b.StartTimer()
			}
		})
	}
}

// setMapLimit pretends vm.max_map_count is n for the test.
func setMapLimit(a *Allocator, n int64) { a.limit.Store(n) }
