//go:build linux

package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/filamq/fila/server/internal/testdisk"
)

// setMapLimit pretends vm.max_map_count is n for the test.
func setMapLimit(t *testing.T, n int64) {
	t.Helper()
	old := maxMapCount.Load()
	maxMapCount.Store(n)
	t.Cleanup(func() { maxMapCount.Store(old) })
}

// logFallbacks sends the fallbacks' log lines to a buffer for the test, as if none was logged yet.
func logFallbacks(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := fallbackLog.Load()
	fallbackLog.Store(slog.New(slog.NewTextHandler(&buf, nil)))
	for i := range fallbackLogged {
		fallbackLogged[i] = sync.Once{}
	}
	t.Cleanup(func() { fallbackLog.Store(old) })
	return &buf
}

// Near vm.max_map_count the engine keeps its mappings to their share: past the scratch share a
// chunk is anonymous memory, past the engine's share the Go heap; each counted, logged once, and
// every record still reads back. Once mappings are given back, chunks are regions again.
func TestMapLimitFallsBack(t *testing.T) {
	s := useScratch(t, false)
	logs := logFallbacks(t)
	dropSpares(s)
	unmapper.wait()
	base := mappings.Load() // (earlier tests' queues collected meanwhile only lower it)
	limit := 2 * (base + 3) // room for three more scratch regions, and a few anonymous buffers
	setMapLimit(t, limit)
	before := ReadMappedStats().MapLimitFallbacks
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
		ch, isMapped := allocSweepable[rec](chunkSize)
		switch {
		case isScratch(ch):
			scratch++
		case isMapped:
			anon++
		default:
			heap++
		}
		if n := mappings.Load(); n > limit*mapShareNum/mapShareDen {
			t.Fatalf("%d engine mappings, past the share %d of a limit of %d", n, limit*mapShareNum/mapShareDen, limit)
		}
		if n := scratchMappings(t, s.dir); int64(n) > limit/scratchShare {
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
	if got := ReadMappedStats().MapLimitFallbacks - before; got < int64(anon+heap) {
		t.Fatalf("%d map-limit fallbacks counted, want at least %d", got, anon+heap)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("the map limit was logged %d times, want once:\n%s", n, logs)
	}
	for j, c := range chunks {
		for i := range c.recs {
			if c.recs[i].attempts != uint32(j) {
				t.Fatalf("chunk %d record %d reads %d", j, i, c.recs[i].attempts)
			}
		}
		freeMapped(c.recs, c.mapped)
	}
	unmapper.wait()
	ch, isMapped := allocSweepable[rec](chunkSize)
	if !isScratch(ch) {
		t.Fatal("a chunk is not a scratch region once the mappings were given back")
	}
	freeMapped(ch, isMapped)
}

// setStatFS replaces the file system's statfs for the test, while no region is being made ahead.
func setStatFS(t *testing.T, fn func(string) (int64, int64, error)) {
	t.Helper()
	waitMakers()
	old := statFS
	statFS = fn
	t.Cleanup(func() { waitMakers(); statFS = old })
}

// Scratch files are refused on file systems that do not keep what fallocate reserves (a write
// to a full disk through the mapping would be a SIGBUS), and on a tmpfs (memory already).
func TestScratchRefusesFileSystemsWithoutReserve(t *testing.T) {
	t.Run("tmpfs", func(t *testing.T) {
		_, err := OpenScratch(filepath.Join(testdisk.Tmpfs(t, 4), "scratch"), ScratchOptions{})
		if !errors.Is(err, errNoReserve) || !strings.Contains(err.Error(), "tmpfs") {
			t.Fatalf("OpenScratch on a tmpfs: %v", err)
		}
	})
	t.Run("ext4", func(t *testing.T) {
		s, err := OpenScratch(filepath.Join(testdisk.Ext4(t, 8), "scratch"), ScratchOptions{})
		if err != nil {
			t.Fatalf("OpenScratch on ext4: %v", err)
		}
		s.Close()
	})
	t.Run("no fallocate", func(t *testing.T) {
		setReserve(t, func(int, int64) error { return syscall.EOPNOTSUPP })
		if _, err := OpenScratch(t.TempDir(), ScratchOptions{}); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Fatalf("OpenScratch without fallocate: %v", err)
		}
	})
	for magic, name := range map[int64]string{0x9123683E: "btrfs", 0x2FC12FC1: "zfs", 0x12345678: "0x12345678"} {
		t.Run(name, func(t *testing.T) {
			setStatFS(t, func(string) (int64, int64, error) { return magic, 1 << 40, nil })
			_, err := OpenScratch(t.TempDir(), ScratchOptions{})
			if !errors.Is(err, errNoReserve) || !strings.Contains(err.Error(), name) {
				t.Fatalf("OpenScratch on %s: %v", name, err)
			}
		})
	}
}

// Regions leave KeepFree of a real disk free (the store's reserve), a chunk past it is anonymous
// memory, and when another writer fills the disk the regions made before are still written to
// in full without a fault: their blocks were reserved when they were made.
func TestScratchKeepsFreeSpaceForTheStore(t *testing.T) {
	disk := testdisk.Ext4(t, 32)
	const keep = 12 << 20
	s, err := OpenScratch(filepath.Join(disk, "scratch"), ScratchOptions{KeepFree: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := ReadMappedStats().Fallbacks
	var regions [][]rec
	for {
		if len(regions) > 100 {
			t.Fatal("regions never stopped at the space kept free")
		}
		ch, isMapped := allocSweepable[rec](chunkSize)
		if !isScratch(ch) {
			if !isMapped {
				t.Fatal("a chunk past the space kept free is not mapped")
			}
			freeMapped(ch, isMapped)
			break
		}
		regions = append(regions, ch)
	}
	s.spares.wait()
	if len(regions) < 4 {
		t.Fatalf("%d regions made on a disk of 32 MiB keeping %d MiB", len(regions), keep>>20)
	}
	if free := testdisk.Free(t, disk); free < keep {
		t.Fatalf("%d bytes free after the regions, want at least the %d kept", free, keep)
	}
	if got := ReadMappedStats().Fallbacks - before; got != 1 {
		t.Fatalf("%d fallbacks counted, want 1", got)
	}
	testdisk.Fill(t, filepath.Join(disk, "filler"))
	for j, ch := range regions { // untouched until now: a hole here would fault on the full disk
		for i := range ch {
			ch[i].attempts = uint32(j + i)
		}
	}
	Sweep()
	for j, ch := range regions {
		for i := range ch {
			if ch[i].attempts != uint32(j+i) {
				t.Fatalf("region %d record %d reads %d", j, i, ch[i].attempts)
			}
		}
		freeMapped(ch, true)
	}
}

// A full chunk's region is made ahead, off the Queue's goroutine: the chunk after the first of
// its size takes it without touching the file system (here one that would refuse), and the maker,
// refused, makes nothing more until asked again. Close gives back what was made ahead.
func TestRegionsAreMadeAhead(t *testing.T) {
	s := useScratch(t, false)
	dropSpares(s)
	first, _ := allocSweepable[rec](chunkSize) // none ready: made here, and one asked for
	s.spares.wait()
	s.spares.mu.Lock()
	ahead := s.spares.ready[chunkSize*recSize]
	s.spares.mu.Unlock()
	if ahead == nil {
		t.Fatal("no region made ahead after a chunk of its size")
	}
	setReserve(t, func(int, int64) error { return errors.New("the file system refuses") })
	second, _ := allocSweepable[rec](chunkSize)
	if !isScratch(second) || addrOf(unsafeBytes(second)) != addrOf(ahead) {
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
	freeMapped(first, true)
	freeMapped(second, true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	unmapper.wait()
	if n := scratchMappings(t, s.dir); n != 0 {
		t.Fatalf("%d mappings of the scratch directory after Close, want 0", n)
	}
}

// BenchmarkChunkRegion: the time a Queue's goroutine spends getting a full chunk's scratch region,
// made there (ahead=false) or taken from the region made ahead (ahead=true). Giving the region
// back and the maker's work are outside the timing.
func BenchmarkChunkRegion(b *testing.B) {
	for _, ahead := range []bool{false, true} {
		b.Run("ahead="+map[bool]string{false: "false", true: "true"}[ahead], func(b *testing.B) {
			s := useScratch(b, false)
			for range b.N {
				b.StopTimer()
				if ahead {
					s.spares.wait()
				} else {
					dropSpares(s)
				}
				unmapper.wait()
				b.StartTimer()
				ch, isMapped := allocSweepable[rec](chunkSize)
				b.StopTimer()
				if !isScratch(ch) {
					b.Fatal("not a scratch region")
				}
				freeMapped(ch, isMapped)
				b.StartTimer()
			}
		})
	}
}
