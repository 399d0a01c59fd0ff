package faultfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOnlySyncedDataSurvivesDrop(t *testing.T) {
	fsys, mnt := mount(t)
	path := filepath.Join(mnt, "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("hello"))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(" world"))
	wantContent(t, path, []byte("hello world"))                               // unsynced data is visible at once
	wantContent(t, filepath.Join(mnt, "..", "backing", "f"), []byte("hello")) // see mount
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fsys.Drop()
	wantContent(t, path, []byte("hello"))
	st := fsys.Stats()
	if st.Syncs != 1 || st.SyncedBytes != 5 || st.Drops != 1 || st.DroppedBytes != 6 || st.DroppedFiles != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDropWithFileOpen(t *testing.T) {
	fsys, mnt := mount(t)
	path := filepath.Join(mnt, "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteAt([]byte("0123456789"), 0)
	f.Sync()
	f.WriteAt([]byte("abc"), 2)
	f.WriteAt([]byte("tail"), 10)
	fsys.Drop()
	buf := make([]byte, 20)
	n, _ := f.ReadAt(buf, 0)
	if got := string(buf[:n]); got != "0123456789" {
		t.Fatalf("after Drop the open file reads %q", got)
	}
	f.WriteAt([]byte("X"), 0) // the handle keeps working
	f.Sync()
	f.Close()
	fsys.Drop()
	wantContent(t, path, []byte("X123456789"))
}

func TestTruncation(t *testing.T) {
	fsys, mnt := mount(t)
	orig := bytes.Repeat([]byte("abcdefghij"), 10)
	cases := []struct {
		name   string
		do     func(t *testing.T, path string)
		before []byte // content before Drop
		after  []byte // content after Drop
	}{
		{"ftruncate down", func(t *testing.T, p string) { must(t, os.Truncate(p, 10)) }, orig[:10], orig},
		{"ftruncate down, synced", func(t *testing.T, p string) { truncSync(t, p, 10) }, orig[:10], orig[:10]},
		{"ftruncate up", func(t *testing.T, p string) { must(t, os.Truncate(p, 105)) }, append(bytes.Clone(orig), 0, 0, 0, 0, 0), orig},
		{"down then up reads zeros", func(t *testing.T, p string) {
			must(t, os.Truncate(p, 10))
			truncSync(t, p, 20)
		}, append(bytes.Clone(orig[:10]), make([]byte, 10)...), append(bytes.Clone(orig[:10]), make([]byte, 10)...)},
		{"down, write past the end", func(t *testing.T, p string) {
			must(t, os.Truncate(p, 5))
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			must(t, err)
			f.WriteAt([]byte("Z"), 8)
			must(t, f.Sync())
			f.Close()
		}, append(bytes.Clone(orig[:5]), 0, 0, 0, 'Z'), append(bytes.Clone(orig[:5]), 0, 0, 0, 'Z')},
		{"O_TRUNC", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			must(t, err)
			f.Write([]byte("new"))
			f.Close()
		}, []byte("new"), orig},
		{"os.Create over a synced file, synced", func(t *testing.T, p string) { create(t, p, []byte("new"), true) }, []byte("new"), []byte("new")},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(mnt, fmt.Sprint(i))
			create(t, path, orig, true)
			c.do(t, path)
			wantContent(t, path, c.before)
			fsys.Drop()
			wantContent(t, path, c.after)
		})
	}
}

// truncSync sets the file's size with ftruncate and fsyncs it.
func truncSync(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	must(t, f.Truncate(size))
	must(t, f.Sync())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRenameOfUnsyncedFile(t *testing.T) {
	fsys, mnt := mount(t)
	tmp, final := filepath.Join(mnt, "CURRENT.tmp"), filepath.Join(mnt, "CURRENT")
	create(t, final, []byte("old"), true)
	f, err := os.Create(tmp)
	must(t, err)
	f.Write([]byte("synced;"))
	must(t, f.Sync())
	f.Write([]byte("unsynced"))
	must(t, os.Rename(tmp, final)) // renamed while open: data follows the inode
	f.Write([]byte("+more"))
	f.Close()
	wantContent(t, final, []byte("synced;unsynced+more"))
	fsys.Drop()
	wantContent(t, final, []byte("synced;"))
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the renamed name came back: %v", err)
	}
	waitTracked(t, fsys, 0)
}

func TestUnlinkForgetsUnsyncedData(t *testing.T) {
	fsys, mnt := mount(t)
	path := filepath.Join(mnt, "gone")
	create(t, path, []byte("never synced"), false)
	if n := tracked(fsys); n != 1 {
		t.Fatalf("%d files tracked, want the one with unsynced data", n)
	}
	must(t, os.Remove(path))
	waitTracked(t, fsys, 0)                // the kernel releases a closed file asynchronously
	create(t, path, []byte("fresh"), true) // may reuse the inode number
	fsys.Drop()
	wantContent(t, path, []byte("fresh"))
}

func TestHardLinkSharesOverlay(t *testing.T) {
	fsys, mnt := mount(t)
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	create(t, a, []byte("one"), true)
	must(t, os.Link(a, b))
	f, err := os.OpenFile(b, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	f.Write([]byte(" two"))
	f.Close()
	wantContent(t, a, []byte("one two"))
	fsys.Drop()
	wantContent(t, a, []byte("one"))
	wantContent(t, b, []byte("one"))
}

func TestManySmallWrites(t *testing.T) {
	fsys, mnt := mount(t)
	path := filepath.Join(mnt, "log")
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	var want, synced []byte
	for i := range 3000 {
		rec := fmt.Appendf(nil, "rec-%d;", i)
		if _, err := f.Write(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec...)
		if i%7 == 0 { // rewrite an earlier byte now and then, as a block format's header update would
			off := int64(i*31) % int64(len(want))
			f.WriteAt([]byte{'#'}, off)
			want[off] = '#'
		}
		if i == 1999 {
			must(t, f.Sync())
			synced = bytes.Clone(want)
		}
	}
	wantContent(t, path, want)
	f.Close()
	fsys.Drop()
	wantContent(t, path, synced)
}

// TestAppend covers files opened O_APPEND: appends land at the logical end, before and after a
// Drop, including after a truncation the drop undid.
func TestAppend(t *testing.T) {
	fsys, mnt := mount(t)
	path := filepath.Join(mnt, "wal")
	appendTo := func(data string, sync bool) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		must(t, err)
		defer f.Close()
		for _, c := range []byte(data) {
			if _, err := f.Write([]byte{c}); err != nil {
				t.Fatal(err)
			}
		}
		if sync {
			must(t, f.Sync())
		}
	}
	appendTo("abc", true)
	appendTo("def", false)
	wantContent(t, path, []byte("abcdef"))
	fsys.Drop()
	wantContent(t, path, []byte("abc"))
	appendTo("g", true)
	wantContent(t, path, []byte("abcg"))
	must(t, os.Truncate(path, 1))
	fsys.Drop()
	appendTo("h", false)
	wantContent(t, path, []byte("abcgh"))
}

func TestFallocate(t *testing.T) {
	fsys, mnt := mount(t)
	path := filepath.Join(mnt, "pre")
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	f.Write([]byte("x"))
	must(t, f.Sync())
	const keepSize = 1 // FALLOC_FL_KEEP_SIZE: what Pebble's preallocation asks for
	must(t, syscall.Fallocate(int(f.Fd()), keepSize, 0, 1<<20))
	wantContent(t, path, []byte("x"))
	must(t, syscall.Fallocate(int(f.Fd()), 0, 0, 8))
	wantContent(t, path, []byte("x\x00\x00\x00\x00\x00\x00\x00"))
	fsys.Drop()
	wantContent(t, path, []byte("x"))
}

// While writes fail, a write and an fsync return the error and change nothing; reads go on, and
// after ResumeWrites both work again.
func TestFailWrites(t *testing.T) {
	fsys, mnt := mount(t)
	path := filepath.Join(mnt, "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("kept"))
	fsys.FailWrites(syscall.EIO)
	if _, err := f.Write([]byte(" lost")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write on a failing disk: %v, want EIO", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync on a failing disk: %v, want EIO", err)
	}
	wantContent(t, path, []byte("kept"))
	wantContent(t, filepath.Join(mnt, "..", "backing", "f"), nil) // the failed fsync made nothing durable
	fsys.ResumeWrites()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	wantContent(t, filepath.Join(mnt, "..", "backing", "f"), []byte("kept"))
	if st := fsys.Stats(); st.Failed != 2 {
		t.Fatalf("stats %+v, want 2 failed operations", st)
	}
}
