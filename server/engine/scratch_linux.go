package engine

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reserve gives the file fd its size with every block allocated, so that writing through the
// mapping can never meet a full disk (a fault, SIGBUS). A variable so that tests can fail it.
var reserve = func(fd int, size int64) error { return unix.Fallocate(fd, 0, 0, size) }

// scratchSeq names the files of systems without unnamed files.
var scratchSeq atomic.Uint64

// mapFile maps n bytes, shared, from a new file in dir with its space reserved: an unnamed file
// (O_TMPFILE), or a named one unlinked at once where the file system has none. The file's
// descriptor is closed before returning; the mapping keeps the file until it is unmapped.
func mapFile(dir string, n int) ([]byte, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		name := filepath.Join(dir, fmt.Sprintf("%s%d-%d", scratchPrefix, os.Getpid(), scratchSeq.Add(1)))
		fd, err = unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Unlink(name); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	defer unix.Close(fd)
	page := os.Getpagesize()
	if err := reserve(fd, int64((n+page-1)/page*page)); err != nil {
		return nil, fmt.Errorf("reserving %d bytes: %w", n, err)
	}
	return unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// unmapFile gives back a region from mapFile. It must be x/sys/unix's Munmap, which knows the
// mappings of unix.Mmap (syscall.Munmap refuses them, and the region would stay mapped).
func unmapFile(b []byte) { _ = unix.Munmap(b) }

// dropPages removes a shared file mapping's pages from the process (they stay in the page cache,
// dirty ones to be written back). Only ever for scratch regions: on private anonymous memory
// MADV_DONTNEED would zero the data.
func dropPages(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }

// residency counts the pages of regions that are in the process (/proc/self/pagemap) and in the
// page cache (mincore, which reports the page cache for a file mapping).
type residency struct {
	pagemap *os.File // nil if it cannot be read
	buf     []byte
	vec     []byte
}

func openResidency() *residency {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		f = nil
	}
	return &residency{pagemap: f}
}

func (p *residency) close() {
	if p.pagemap != nil {
		p.pagemap.Close()
	}
}

// count returns the bytes of r that are resident in the process and in the page cache.
func (p *residency) count(r []byte) (resident, cached int64) {
	page := os.Getpagesize()
	n := (len(r) + page - 1) / page
	p.vec = slices.Grow(p.vec[:0], n)[:n]
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, addrOf(r), uintptr(len(r)), uintptr(unsafe.Pointer(&p.vec[0]))); errno == 0 {
		for _, v := range p.vec {
			cached += int64(v & 1)
		}
	}
	if p.pagemap != nil {
		p.buf = slices.Grow(p.buf[:0], 8*n)[:8*n]
		first := int64(addrOf(r)) / int64(page)
		if _, err := p.pagemap.ReadAt(p.buf, first*8); err == nil {
			for i := range n {
				resident += int64(binary.LittleEndian.Uint64(p.buf[8*i:]) >> 63)
			}
		}
	}
	return resident * int64(page), cached * int64(page)
}
