package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"pgregory.net/rapid"
)

// walFiles' sizes in dir, by name.
func walSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	logs, err := walFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, path := range logs {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes[filepath.Base(path)] = st.Size()
	}
	return sizes
}

// awaitFill waits until a WAL of dir is zero-filled to the first WAL's fill (walFillMin).
func awaitFill(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for filled := false; !filled; {
		for _, size := range walSizes(t, dir) {
			filled = filled || size >= walFillMin
		}
		if !filled && time.Now().After(deadline) {
			t.Fatalf("no WAL reached %d bytes: %v", walFillMin, walSizes(t, dir))
		}
		time.Sleep(time.Millisecond)
	}
}

// copyDir copies every file of src into dst, as a crash would leave them.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A new store's WAL is zero-filled ahead of its appends, so that its synced appends
// overwrite written blocks; a crash image of it (data, then zeros) passes the offline check
// and opens with every synced entry.
func TestNewWALIsZeroFilledAndRecoversFromACrash(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	awaitFill(t, dir)
	ids := []ID{{1}, {2}}
	storeEnqueue(t, db, "orders", 1, ids, "a", "b")

	crash := t.TempDir()
	copyDir(t, dir, crash)
	rep, err := Check(crash)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check of the crash image: %+v, %v", rep, err)
	}
	again, err := Open(crash, Options{MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	logs, _, err := again.QueueLog("orders", groupBodies)
	if err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := logs.GetLog(1, &l); err != nil {
		t.Fatalf("the synced entry after the crash: %v", err)
	}
	if b, err := again.ReadBody("orders", ids[1]); err != nil || string(b.Payload) != "b" {
		t.Fatalf("body after the crash: %+v, %v", b, err)
	}
}

// A store that never syncs its WAL does not fill it.
func TestNoSyncStoreDoesNotFillItsWAL(t *testing.T) {
	if f := newWALFills(Options{MemTableBytes: 4 << 20, NoSync: true}); f != nil {
		t.Fatalf("WAL fills with NoSync: %+v", f)
	}
}

// Whatever the sizes and timing of the appends, the filler never overwrites one: each WAL holds
// every appended byte, then zeros, and no more than twice what the WAL before it holds (at
// least walFillMin, at most the maximum) or its appends; a recycled one is not filled.
func TestWALFillNeverOverwritesAppends(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		fills := &walFills{max: rapid.Int64Range(1, 4*walFillChunk).Draw(rt, "max")}
		prev := int64(-1)
		for k := range rapid.IntRange(1, 4).Draw(rt, "wals") {
			sizes := rapid.SliceOfN(rapid.IntRange(1, 256<<10), 1, 32).Draw(rt, "appends")
			closeEarly := rapid.Bool().Draw(rt, "closeEarly")
			recycled := rapid.Bool().Draw(rt, "recycled")
			path := filepath.Join(dir, fmt.Sprintf("%06d.log", k))
			raw, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
			if err != nil {
				rt.Fatal(err)
			}
			defer os.Remove(path)
			f := fills.open(raw, raw, recycled)
			var appended []byte
			for i, n := range sizes {
				p := bytes.Repeat([]byte{byte(i%255 + 1)}, n)
				if _, err := f.Write(p); err != nil {
					rt.Fatal(err)
				}
				appended = append(appended, p...)
				if closeEarly && i == len(sizes)/2 {
					break
				}
			}
			if err := f.Close(); err != nil {
				rt.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				rt.Fatal(err)
			}
			if len(got) < len(appended) || !bytes.Equal(got[:len(appended)], appended) {
				rt.Fatalf("WAL %d does not start with the %d appended bytes (it holds %d)", k, len(appended), len(got))
			}
			if rest := got[len(appended):]; len(rest) > 0 && !bytes.Equal(rest, make([]byte, len(rest))) {
				rt.Fatalf("the %d bytes after WAL %d's appends are not all zeros", len(rest), k)
			}
			target := min(max(walFillMin, 2*prev), fills.max)
			if recycled {
				target = 0 // a recycled WAL is not filled
			}
			if int64(len(got)) > max(target, int64(len(appended))) {
				rt.Fatalf("WAL %d grew to %d bytes, past its fill (%d) and its appends (%d)", k, len(got), target, len(appended))
			}
			prev = int64(len(appended))
		}
	})
}

// A crash image whose last WAL record was torn (its tail never reached the disk, so it reads as
// the zeros the filler wrote) passes the offline check and opens with every entry before it,
// whatever the size of the tear, also when the record spans WAL blocks and loses whole chunks.
func TestWALTornLastRecordBeforeZerosRecovers(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	awaitFill(t, dir)
	storeEnqueue(t, db, "orders", 1, []ID{{1}}, "a")
	storeEnqueue(t, db, "orders", 2, []ID{{2}}, string(bytes.Repeat([]byte("b"), 80<<10)))
	for _, tear := range []int{1, 100, 40 << 10, 70 << 10} {
		t.Run(fmt.Sprint(tear), func(t *testing.T) {
			crash := t.TempDir()
			copyDir(t, dir, crash)
			logs, err := walFiles(crash)
			if err != nil || len(logs) == 0 {
				t.Fatalf("WALs of the crash image: %v, %v", logs, err)
			}
			wal := logs[len(logs)-1]
			b, err := os.ReadFile(wal)
			if err != nil {
				t.Fatal(err)
			}
			end := len(bytes.TrimRight(b, "\x00"))
			clear(b[end-tear : end])
			if err := os.WriteFile(wal, b, 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Check(crash)
			if err != nil || len(rep.Problems) != 0 {
				t.Fatalf("check of the crash image: %+v, %v", rep, err)
			}
			again, err := Open(crash, Options{MemTableBytes: 4 << 20})
			if err != nil {
				t.Fatalf("open after a torn last record: %v", err)
			}
			defer again.Close()
			ql, _, err := again.QueueLog("orders", groupBodies)
			if err != nil {
				t.Fatal(err)
			}
			var l raft.Log
			if err := ql.GetLog(1, &l); err != nil {
				t.Fatalf("the entry before the torn one: %v", err)
			}
			if err := ql.GetLog(2, &l); err == nil {
				t.Fatal("the torn entry reads back")
			}
		})
	}
}

// A WAL that follows one appended to faster than the busy rate is not filled: a busy store
// shares its syncs, and zeros written beside its commits would only slow them.
func TestWALAfterABusyOneIsNotFilled(t *testing.T) {
	dir := t.TempDir()
	fills := &walFills{max: 4 * walFillChunk, busy: 1} // 1 byte per second: any append is busy
	var sizes []int64
	for k := range 2 {
		path := filepath.Join(dir, fmt.Sprintf("%06d.log", k))
		raw, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f := fills.open(raw, raw, false)
		if _, err := f.Write(bytes.Repeat([]byte{1}, 4096)); err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			awaitFill(t, dir) // the first WAL after an open has no rate yet: it is filled
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, st.Size())
	}
	if sizes[0] < walFillMin || sizes[1] != 4096 {
		t.Fatalf("WAL sizes %v: want the first filled to %d, the second only its 4096 appended bytes", sizes, walFillMin)
	}
}
