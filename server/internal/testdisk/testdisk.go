//go:build linux

// Package testdisk mounts small real file systems for tests that need a disk to fill up or a
// file system of a given kind. The tests that use it are skipped where mounting is not possible
// (not root, no mount(8), no loop devices).
package testdisk

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Ext4 mounts an ext4 file system of mib MiB (a loop-mounted image in t.TempDir()) and returns
// its mount point; it is unmounted when the test ends.
func Ext4(t testing.TB, mib int) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, int64(mib)<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Skipf("cannot make an ext4 file system here (%v: %s)", err, bytes.TrimSpace(out))
	}
	return mount(t, "-o", "loop", img)
}

// Tmpfs mounts a tmpfs of mib MiB and returns its mount point.
func Tmpfs(t testing.TB, mib int) string {
	t.Helper()
	return mount(t, "-t", "tmpfs", "-o", "size="+strconv.Itoa(mib)+"m", "tmpfs")
}

func mount(t testing.TB, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", append(args, dir)...).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here (%v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Fill writes zeros to path until the disk is full.
func Fill(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// Free returns the bytes free in dir's file system for an unprivileged writer.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
