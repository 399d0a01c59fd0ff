package faultfs

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted faultfs. Its methods are safe for concurrent use with each other and with
// the file operations of the mount.
type FS struct {
	server *fuse.Server

	mu    sync.Mutex
	files map[uint64]*file // by backing inode number: files that are open or hold unsynced changes
	stats Stats
	// failing is the error every write, fsync and allocation of a regular file returns while it
	// is set (FailWrites), changing nothing: a disk that fails.
	failing syscall.Errno

	holdMu sync.Mutex
	hold   chan struct{} // while HoldWrites: closed by ReleaseWrites
}

// Stats counts what the mount made durable and what Drop threw away.
type Stats struct {
	Syncs        uint64 // fsync and fdatasync calls on regular files
	SyncedBytes  uint64 // unsynced bytes those calls wrote to backing files
	Drops        uint64 // calls of Drop
	DroppedBytes uint64 // unsynced bytes Drop discarded (a byte overwritten before a sync counts once)
	DroppedFiles uint64 // files with any unsynced change (data, size) at a Drop
	Failed       uint64 // writes, fsyncs and allocations failed by FailWrites
}

// Mount serves a faultfs over the directory backing at mountpoint (both must exist). It mounts
// with mount(2) directly, which needs root, and falls back to the fusermount helper otherwise.
func Mount(backing, mountpoint string) (*FS, error) {
	st, err := os.Stat(backing)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("faultfs: backing %s is not a directory", backing)
	}
	f := &FS{files: map[uint64]*file{}}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Sys().(*syscall.Stat_t).Dev)}
	rootNode := &node{LoopbackNode: &fs.LoopbackNode{RootData: root}, fs: f}
	root.RootNode = rootNode
	var zero time.Duration
	f.server, err = fs.Mount(mountpoint, rootNode, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      backing,
			Name:        "faultfs",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("faultfs: mount %s: %w", mountpoint, err)
	}
	return f, nil
}

// Drop discards every unsynced change of every file, open or closed, so that each file reads
// as it was at its last fsync: the state after a power failure.
func (f *FS) Drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Drops++
	for ino, fl := range f.files {
		if fl.dirty() {
			f.stats.DroppedFiles++
		}
		f.stats.DroppedBytes += uint64(fl.drop())
		if fl.opens == 0 {
			fl.backing.Close()
			delete(f.files, ino)
		}
	}
}

// FailWrites makes every write, fsync and allocation of a regular file fail with errno, changing
// nothing, until ResumeWrites: a disk that fails (EIO) or is full (ENOSPC). Reads, truncation
// and directory operations go on.
func (f *FS) FailWrites(errno syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = errno
}

// ResumeWrites ends FailWrites.
func (f *FS) ResumeWrites() { f.FailWrites(0) }

// HoldWrites makes every write, fsync and allocation of a regular file wait until ReleaseWrites:
// a disk that no longer answers. Reads and directory operations go on.
func (f *FS) HoldWrites() {
	f.holdMu.Lock()
	defer f.holdMu.Unlock()
	if f.hold == nil {
		f.hold = make(chan struct{})
	}
}

// ReleaseWrites ends HoldWrites: the writes waiting go on.
func (f *FS) ReleaseWrites() {
	f.holdMu.Lock()
	defer f.holdMu.Unlock()
	if f.hold != nil {
		close(f.hold)
		f.hold = nil
	}
}

// held waits while HoldWrites is on. Called without f.mu, so reads go on meanwhile.
func (f *FS) held() {
	f.holdMu.Lock()
	hold := f.hold
	f.holdMu.Unlock()
	if hold != nil {
		<-hold
	}
}

// failed returns the error of a write while FailWrites is on, counting it. Called with f.mu
// held.
func (f *FS) failed() syscall.Errno {
	if f.failing != 0 {
		f.stats.Failed++
	}
	return f.failing
}

// Stats returns the counters so far.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Unmount unmounts the file system; it fails while files on it are in use. Unsynced changes
// still held are discarded, as by Drop.
func (f *FS) Unmount() error {
	if err := f.server.Unmount(); err != nil {
		return err
	}
	f.server.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for ino, fl := range f.files {
		fl.backing.Close()
		delete(f.files, ino)
	}
	return nil
}

// open returns the file of the backing file at path, opening it, and counts one more open
// handle on it when handle is set. Called with f.mu held.
func (f *FS) open(path string, flags int, mode uint32, handle bool) (*file, error) {
	b, err := os.OpenFile(path, os.O_RDWR|flags, os.FileMode(mode))
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(b.Fd()), &st); err != nil {
		b.Close()
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		b.Close()
		return nil, syscall.EINVAL
	}
	fl := f.files[st.Ino]
	if fl == nil {
		fl = newFile(b, st.Ino, st.Size)
		f.files[st.Ino] = fl
	} else {
		b.Close()
	}
	if handle {
		fl.opens++
	}
	return fl, nil
}

// release forgets one open handle of fl. Called with f.mu held.
func (f *FS) release(fl *file) {
	fl.opens--
	f.forgetIfIdle(fl)
}

// forgetIfIdle drops fl from the table when nothing needs it: no open handle and either no
// unsynced change or no name left (an unlinked file's data is gone with it). Called with f.mu
// held.
func (f *FS) forgetIfIdle(fl *file) {
	if fl.opens > 0 {
		return
	}
	if fl.dirty() {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(fl.backing.Fd()), &st); err != nil || st.Nlink > 0 {
			return
		}
	}
	fl.backing.Close()
	delete(f.files, fl.ino)
}

// unlinked is told that a name of the backing inode ino went away (unlink, or a rename over
// it). Called with f.mu held.
func (f *FS) unlinked(ino uint64) {
	if fl := f.files[ino]; fl != nil {
		f.forgetIfIdle(fl)
	}
}

// logicalSize is the size of the backing inode ino as the mount shows it. Called with f.mu
// held.
func (f *FS) logicalSize(ino uint64, backingSize uint64) uint64 {
	if fl := f.files[ino]; fl != nil {
		return uint64(fl.size)
	}
	return backingSize
}
