// Package faultfs is a FUSE file system for power-failure tests: a loopback over a backing
// directory that keeps file data in memory until it is fsynced, and can throw away everything
// unsynced on command, as a power cut would.
//
// # The model
//
// The backing directory is the simulated disk: what is in a backing file is durable. For each
// regular file the mount keeps an overlay of changes since that file's last fsync:
//
//   - Writes go to the overlay and are visible at once to every reader of the mount.
//   - Truncation (ftruncate, truncate, O_TRUNC, fallocate growing the file) changes the file's
//     logical size in the overlay; the backing file keeps its old size and bytes.
//   - fsync or fdatasync of any descriptor of the file writes the overlay to the backing file
//     (truncation first, then the data, then the final size) and empties it.
//   - [FS.Drop] empties every overlay without writing it: each file reads back exactly as it
//     was at its last fsync. Files open at the moment of the drop keep working, but the
//     kernel's cached size of such a file may be stale (appends could land past the end), so a
//     test should stop the processes using the mount first, as a power cut does.
//
// Directory operations (create, mkdir, rename, unlink, link, symlink) are applied to the backing
// directory at once and are never undone by Drop: the model assumes every namespace change is
// durable immediately, which is stronger than a real file system gives (there, a file created
// or renamed since its parent directory's last fsync may vanish). Directory fsync is passed to
// the backing directory. Metadata other than the size (mode, owner, times) comes from the
// backing file. The backing files themselves are never fsynced: the host's own durability is not
// under test.
//
// Data never enters the kernel's page cache (every open is FOPEN_DIRECT_IO) and attributes and
// entries are never cached (zero timeouts), so what a reader sees always comes from the model.
// mmap and O_TMPFILE are not supported; file locks are handled by the kernel locally.
// The backing directory must be one file system (files are keyed by inode number).
package faultfs
