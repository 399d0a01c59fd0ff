package faultfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is one open descriptor of a regular file. It deliberately has no passthrough file
// descriptor, so that every read and write reaches the overlay.
type handle struct {
	fs *FS
	f  *file
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileWritever  = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

func (h *handle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	n, err := h.f.readAt(dest, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(_ context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.fs.held()
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if errno := h.fs.failed(); errno != 0 {
		return 0, errno
	}
	h.f.writeAt(data, off)
	return uint32(len(data)), 0
}

func (h *handle) Writev(_ context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	h.fs.held()
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if errno := h.fs.failed(); errno != 0 {
		return 0, errno
	}
	n := 0
	for _, d := range data {
		h.f.writeAt(d, off+int64(n))
		n += len(d)
	}
	return uint32(n), 0
}

// Fsync makes the file's unsynced changes durable (fsync and fdatasync alike).
func (h *handle) Fsync(_ context.Context, _ uint32) syscall.Errno {
	h.fs.held()
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if errno := h.fs.failed(); errno != 0 {
		return errno
	}
	n, err := h.f.sync()
	if err != nil {
		return fs.ToErrno(err)
	}
	h.fs.stats.Syncs++
	h.fs.stats.SyncedBytes += uint64(n)
	return 0
}

// Flush (close of one descriptor) makes nothing durable.
func (h *handle) Flush(context.Context) syscall.Errno { return 0 }

func (h *handle) Release(context.Context) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	h.fs.release(h.f)
	return 0
}

func (h *handle) Getattr(_ context.Context, out *fuse.AttrOut) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(h.f.backing.Fd()), &st); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&st)
	out.Size = uint64(h.f.size)
	return 0
}

// Allocate supports what preallocation needs: with FALLOC_FL_KEEP_SIZE nothing changes (space
// is not modelled); without flags the file grows to cover the range, as an unsynced change.
func (h *handle) Allocate(_ context.Context, off, size uint64, mode uint32) syscall.Errno {
	h.fs.held()
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if errno := h.fs.failed(); errno != 0 {
		return errno
	}
	switch mode {
	case unix.FALLOC_FL_KEEP_SIZE:
	case 0:
		if end := int64(off + size); end > h.f.size {
			h.f.truncate(end)
		}
	default:
		return syscall.EOPNOTSUPP
	}
	return 0
}
