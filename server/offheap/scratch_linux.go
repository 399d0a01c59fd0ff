package offheap

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reserveFile gives the file fd its size with every block allocated, so that writing through the
// mapping can never meet a full disk (a fault, SIGBUS). (Allocator.reserve, which tests replace.)
func reserveFile(fd int, size int64) error { return unix.Fallocate(fd, 0, 0, size) }

// mapFile maps n bytes, shared, from a new file in dir with its space reserved: an unnamed file
// (O_TMPFILE), or a named one unlinked at once where the file system has none. The file's
// descriptor is closed before returning; the mapping keeps the file until it is unmapped.
func (a *Allocator) mapFile(dir string, n int) ([]byte, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		name := filepath.Join(dir, fmt.Sprintf("%s%d-%d", scratchPrefix, os.Getpid(), a.seq.Add(1)))
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
	if err := a.reserve(fd, int64((n+page-1)/page*page)); err != nil {
		return nil, fmt.Errorf("reserving %d bytes: %w", n, err)
	}
	return unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// reservingFileSystems are the file systems (statfs f_type, linux/magic.h) where fallocate gives a
// file blocks of its own for good, so that a write through a shared mapping of it never meets a
// full disk. Elsewhere it may not: copy-on-write systems (btrfs, ZFS) allocate anew on every write
// whatever was reserved, some have no fallocate at all, and a tmpfs holds its pages in memory,
// which is what the scratch files are there to avoid.
var reservingFileSystems = map[int64]string{0xEF53: "ext4", 0x58465342: "xfs"}

// otherFileSystems names some file systems where scratch files are not made, for the error.
var otherFileSystems = map[int64]string{
	0x9123683E: "btrfs", 0x2FC12FC1: "zfs", 0x01021994: "tmpfs", 0x794C7630: "overlayfs",
	0x6969: "nfs", 0xFF534D42: "cifs", 0x65735546: "fuse", 0xF2F52010: "f2fs", 0xCA451A4E: "bcachefs",
}

// statFileSystem returns the type of dir's file system and the bytes free there for an
// unprivileged writer. (Allocator.statFS, which tests replace to pretend to be another file
// system.)
func statFileSystem(dir string) (fsType int64, free int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Type), int64(st.Bavail) * int64(st.Bsize), nil
}

// checkReserves returns an error unless the file system of dir keeps the space fallocate
// reserves (reservingFileSystems).
func (a *Allocator) checkReserves(dir string) error {
	fsType, _, err := a.statFS(dir)
	if err != nil {
		return err
	}
	if _, ok := reservingFileSystems[fsType]; ok {
		return nil
	}
	name, ok := otherFileSystems[fsType]
	if !ok {
		name = fmt.Sprintf("file system type %#x", fsType)
	}
	return fmt.Errorf("%w: it is on %s", ErrNoReserve, name)
}

// freeSpace returns the bytes free in dir's file system.
func (a *Allocator) freeSpace(dir string) (int64, error) {
	_, free, err := a.statFS(dir)
	return free, err
}

// readMaxMapCount returns vm.max_map_count, the most mappings a process may have.
func readMaxMapCount() int64 {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return defaultMaxMapCount
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return defaultMaxMapCount
	}
	return n
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
