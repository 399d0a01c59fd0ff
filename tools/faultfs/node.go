package faultfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a file or directory of the mount: go-fuse's loopback node for everything the model
// leaves alone (directories, links, xattrs, statfs), with regular-file data, sizes and syncs
// routed through the FS's overlays.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeStatxer     = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeLinker      = (*node)(nil)
	_ fs.NodeTmpfiler    = (*node)(nil)
)

// WrapChild makes every node the loopback creates one of ours.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(nil))
}

// fixSize replaces a backing file's size in attributes with the logical size.
func (n *node) fixSize(a *fuse.Attr) {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	n.fs.mu.Lock()
	a.Size = n.fs.logicalSize(a.Ino, a.Size)
	n.fs.mu.Unlock()
}

// Lookup reports a child with its logical size.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 {
		n.fixSize(&out.Attr)
	}
	return ch, errno
}

// Create creates (or, without O_EXCL, opens) the backing file; O_TRUNC becomes an unsynced
// truncation.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.fs.mu.Lock()
	fl, err := n.fs.open(filepath.Join(n.backingPath(), name), syscall.O_CREAT|int(flags&syscall.O_EXCL), mode, true)
	if err == nil && flags&syscall.O_TRUNC != 0 {
		fl.truncate(0)
	}
	n.fs.mu.Unlock()
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	ch, errno := n.Lookup(ctx, name, out)
	if errno != 0 {
		n.fs.mu.Lock()
		n.fs.release(fl)
		n.fs.mu.Unlock()
		return nil, nil, 0, errno
	}
	return ch, &handle{fs: n.fs, f: fl}, fuse.FOPEN_DIRECT_IO, 0
}

// Tmpfile refuses O_TMPFILE: the loopback's version would hand out a descriptor that bypasses
// the overlays.
func (n *node) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// Open opens a regular file; O_TRUNC becomes an unsynced truncation.
func (n *node) Open(_ context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	fl, err := n.fs.open(n.backingPath(), 0, 0, true)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		fl.truncate(0)
	}
	return &handle{fs: n.fs, f: fl}, fuse.FOPEN_DIRECT_IO, 0
}

// Getattr reports the backing file's attributes with the logical size.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Getattr(ctx, out)
	}
	if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	n.fixSize(&out.Attr)
	return 0
}

// Statx is Getattr for statx(2).
func (n *node) Statx(ctx context.Context, _ fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if errno := n.LoopbackNode.Statx(ctx, nil, flags, mask, out); errno != 0 {
		return errno
	}
	if uint32(out.Mode)&syscall.S_IFMT == syscall.S_IFREG {
		n.fs.mu.Lock()
		out.Size = n.fs.logicalSize(out.Ino, out.Size)
		n.fs.mu.Unlock()
	}
	return 0
}

// Setattr applies a size change to the overlay and everything else (mode, owner, times) to the
// backing file.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if errno := n.truncate(f, int64(size)); errno != 0 {
			return errno
		}
	}
	rest := *in
	rest.Valid &^= fuse.FATTR_SIZE
	if errno := n.LoopbackNode.Setattr(ctx, nil, &rest, out); errno != 0 {
		return errno
	}
	n.fixSize(&out.Attr)
	return 0
}

// truncate sets the logical size of the file, through its handle f when there is one.
func (n *node) truncate(f fs.FileHandle, size int64) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if h, ok := f.(*handle); ok {
		h.f.truncate(size)
		return 0
	}
	fl, err := n.fs.open(n.backingPath(), 0, 0, false)
	if err != nil {
		return fs.ToErrno(err)
	}
	fl.truncate(size)
	n.fs.forgetIfIdle(fl)
	return 0
}

// Unlink removes the name in the backing directory at once; a file left without a name and
// without an open handle takes its unsynced changes with it.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ino, isFile := n.childIno(name)
	if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
		return errno
	}
	if isFile {
		n.fs.mu.Lock()
		n.fs.unlinked(ino)
		n.fs.mu.Unlock()
	}
	return 0
}

// Rename renames in the backing directory at once; a regular file it replaces loses its name
// as by Unlink.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	ino, isFile := np.childIno(newName)
	if errno := n.LoopbackNode.Rename(ctx, name, np.LoopbackNode, newName, flags); errno != 0 {
		return errno
	}
	if isFile && flags&fs.RENAME_EXCHANGE == 0 {
		n.fs.mu.Lock()
		n.fs.unlinked(ino)
		n.fs.mu.Unlock()
	}
	return 0
}

// childIno is the backing inode number of the entry name, and whether it is a regular file.
func (n *node) childIno(name string) (uint64, bool) {
	var st syscall.Stat_t
	if syscall.Lstat(filepath.Join(n.backingPath(), name), &st) != nil {
		return 0, false
	}
	return st.Ino, st.Mode&syscall.S_IFMT == syscall.S_IFREG
}

// Link adds a name in the backing directory at once; both names share one overlay.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	ch, errno := n.LoopbackNode.Link(ctx, t.LoopbackNode, name, out)
	if errno == 0 {
		n.fixSize(&out.Attr)
	}
	return ch, errno
}
