package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A full disk is the common storage fault, and Pebble takes it badly: a WAL write that fails
// leaves an error in the WAL writer for good (every later commit fails or panics, and a panic
// there leaves the commit pipeline locked), and a blob file whose last write fails crashes a
// background goroutine (sstable/blob FileWriter.Close aborts a writable that Finish already
// closed). So the store keeps a reserve: a file of reserveBytes in the data directory, allocated
// at open. The first write that finds the disk full gives the reserve back to the file system and
// is tried again, so it and the flushes in progress complete, and the store stops accepting
// writes (ENOSPC is its cause). Once the disk has room for the reserve and a probe again, the
// reserve is allocated anew and writes are accepted. Other errors (EIO, EPERM) reach Pebble.

// reserveName is the reserve's file in the data directory (Pebble ignores names it does not know).
const reserveName = "space-reserve"

// reserveFS is Pebble's file system with the reserve: files opened for writing give it back
// when a write finds the disk full.
type reserveFS struct {
	vfs.FS
	// dir is the store's directory: only its files are the store's. Pebble creates others
	// through this file system too (a checkpoint's), which neither spend the reserve nor are
	// filled.
	dir string
	r   *reserve
	// wals zero-fills the WALs ahead of Pebble's writes (walfill.go); nil when the WAL is
	// never synced (NoSync).
	wals *walFills
}

func (fs reserveFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if !fs.owns(name) {
		return f, err
	}
	return fs.wrapWAL(name, f, err, false)
}

func (fs reserveFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if !fs.owns(name) {
		return f, err
	}
	return fs.wrap(f, err)
}

// owns reports whether the file name is in the store's directory (or no directory was given).
func (fs reserveFS) owns(name string) bool {
	return fs.dir == "" || filepath.Dir(name) == fs.dir
}

func (fs reserveFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrapWAL(newname, f, err, true)
}

// wrapWAL is wrap, and for a WAL the zero-filling of its space (walfill.go); recycled tells a
// WAL that overwrites an old one.
func (fs reserveFS) wrapWAL(name string, f vfs.File, err error, recycled bool) (vfs.File, error) {
	wrapped, err := fs.wrap(f, err)
	if err != nil || fs.wals == nil || !isWAL(name) {
		return wrapped, err
	}
	return fs.wals.open(wrapped, f, recycled), nil
}

func (fs reserveFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return reserveFile{File: f, r: fs.r}, nil
}

type reserveFile struct {
	vfs.File
	r *reserve
}

func (f reserveFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if isNoSpace(err) && f.r.release() {
		var m int
		m, err = f.File.Write(p[n:])
		n += m
	}
	return n, err
}

func (f reserveFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if isNoSpace(err) && f.r.release() {
		var m int
		m, err = f.File.WriteAt(p[n:], off+int64(n))
		n += m
	}
	return n, err
}

func (f reserveFile) Preallocate(off, length int64) error {
	err := f.File.Preallocate(off, length)
	if isNoSpace(err) && f.r.release() {
		err = f.File.Preallocate(off, length)
	}
	return err
}

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// reserve is the space the store holds back for the writes in progress when the disk fills up.
type reserve struct {
	path  string
	bytes int64
	// full is called once the reserve was given back: the store stops accepting writes.
	full func(cause error)

	mu   sync.Mutex
	held bool
}

// allocate (re)creates the reserve file with its space allocated (not sparse).
func (r *reserve) allocate() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held || r.bytes <= 0 {
		return nil
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = allocateFile(f, r.bytes)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(r.path)
		return fmt.Errorf("storage: cannot set aside %d MiB in %s for writes in progress when the disk fills up: %w",
			r.bytes>>20, filepath.Dir(r.path), err)
	}
	r.held = true
	return nil
}

// release gives the reserve back to the file system; it reports whether there was one to give.
func (r *reserve) release() bool {
	r.mu.Lock()
	held := r.held
	if held {
		r.held = false
		// Truncate frees the blocks at once, whoever else has the file open.
		_ = os.Truncate(r.path, 0)
	}
	r.mu.Unlock()
	if held {
		r.full(fmt.Errorf("the disk is full (the %d MiB reserve was used for the writes in progress): %w",
			r.bytes>>20, syscall.ENOSPC))
	}
	return held
}

// writeZeros gives f size bytes of real blocks by writing zeros over them.
func writeZeros(f *os.File, size int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return err
		}
	}
	return nil
}
