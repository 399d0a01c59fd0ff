package faultfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// mount mounts a faultfs over a fresh backing directory for one test, skipping the test when
// the machine has no /dev/fuse. It returns the FS and its mountpoint, beside which the backing
// directory is mnt/../backing; the mount goes at cleanup.
func mount(t *testing.T) (*FS, string) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("faultfs needs FUSE and this machine has no /dev/fuse: %v", err)
	}
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return f, mnt
}

// wantContent fails the test unless the file at path holds exactly want.
func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", filepath.Base(path), clip(got), clip(want))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(len(want)) {
		t.Fatalf("%s: stat says %d bytes, want %d", filepath.Base(path), st.Size(), len(want))
	}
}

// clip shortens long contents in failure messages.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:64:64], "..."...)
	}
	return b
}

// create writes data to a new file at path, fsyncing it when sync is set, and closes it.
func create(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// tracked is how many files the FS holds state for.
func tracked(f *FS) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.files)
}

// waitTracked waits until the FS holds state for n files: the kernel sends the release of a
// closed file asynchronously, after close returns.
func waitTracked(t *testing.T, f *FS, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for tracked(f) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d files tracked, want %d", tracked(f), n)
		}
		time.Sleep(time.Millisecond)
	}
}
