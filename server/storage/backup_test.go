package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// A checkpoint is a store a server opens: the bodies and log entries written before it, the
// groups' snapshots beside them, its format; nothing written after it; and Check finds it sound.
// It refuses a directory that exists, and leaves no staging directory behind (Open removes one
// that a crash left).
func TestCheckpointIsAStoreAsOfItsMoment(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	storeEnqueue(t, db, "q", 1, []ID{{1}, {2}}, "one", "two")
	_, snaps, err := db.QueueLog("q", groupBodies)
	if err != nil {
		t.Fatal(err)
	}
	createSnapshot(t, snaps)

	cp := filepath.Join(t.TempDir(), "cp")
	if err := db.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(db.dir, stagingPrefix+"*")); len(left) > 0 {
		t.Fatalf("the checkpoint left its staging directory in the store: %v", left)
	}
	storeEnqueue(t, db, "q", 2, []ID{{3}}, "after")
	if err := db.Checkpoint(cp); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a checkpoint into an existing directory: %v", err)
	}
	rep, err := Check(cp)
	if err != nil || len(rep.Problems) > 0 || rep.Format != FormatVersion {
		t.Fatalf("check of the checkpoint: %v %+v", err, rep)
	}

	leftover := filepath.Join(cp, stagingPrefix+"cut-short", "store")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	copied, err := Open(cp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open left a staging directory a crash cut short: %v", err)
	}
	for id, want := range map[ID]string{{1}: "one", {2}: "two"} {
		if b, err := copied.ReadBody("q", id); err != nil || string(b.Payload) != want {
			t.Errorf("body %x in the checkpoint: %q, %v; want %q", id, b.Payload, err, want)
		}
	}
	if _, err := copied.ReadBody("q", ID{3}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a body written after the checkpoint is in it: %v", err)
	}
	logs, csnaps, err := copied.QueueLog("q", groupBodies)
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := logs.LastIndex(); last != 1 {
		t.Errorf("the checkpoint's log ends at %d, want 1", last)
	}
	if metas, err := csnaps.List(); err != nil || len(metas) != 1 || metas[0].Index != 100 {
		t.Errorf("the checkpoint's snapshots: %+v, %v", metas, err)
	}
}

// A WAL copied while Pebble appended to it can end in a record cut short with later chunks after
// it, which a start takes for damage. trimWALs cuts it after its last complete record: Check finds
// no damage, and Pebble reads every record before the cut.
func TestTrimWALsCutsATornCopyAfterItsLastCompleteRecord(t *testing.T) {
	dir := t.TempDir()
	p, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatValueSeparation, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set([]byte{kindFormat}, binary.BigEndian.AppendUint32(nil, FormatVersion), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 10<<10) // records of 10 KiB: eight of them span three blocks
	for i := range 8 {
		if err := p.Set(fmt.Appendf(nil, "k%d", i), value, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	logs, err := walFiles(dir)
	if err != nil || len(logs) == 0 {
		t.Fatalf("WALs: %v %v", logs, err)
	}
	wal := logs[len(logs)-1]
	data, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	num, _ := walNum(wal)
	type first struct{ at, header int } // where each record's first chunk is
	var records []first
	for base := 0; base < len(data); base += walBlock {
		b := data[base:min(base+walBlock, len(data))]
		for off := 0; off+legacyHeader <= len(b); {
			c := chunkAt(b, off, uint32(num))
			if c.kind != chunkValid {
				break
			}
			if c.starts() {
				records = append(records, first{base + off, c.header})
			}
			off = c.end
		}
	}
	if len(records) != 9 {
		t.Fatalf("found %d records in the WAL, want 9 (the format marker and k0…k7)", len(records))
	}
	torn := records[2].at                  // k1's record: the chunks of k2…k7 follow, in later blocks too
	data[torn+records[2].header+1] ^= 0xff // a payload byte: its checksum no longer matches
	if err := os.WriteFile(wal, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, _ := Check(dir); len(rep.Problems) == 0 {
		t.Fatal("the torn copy passes the check before it is cut: the test damages nothing")
	}

	if err := trimWALs(dir); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(wal); info.Size() != int64(torn) {
		t.Fatalf("the WAL was cut at %d, want %d (after the last complete record)", info.Size(), torn)
	}
	if rep, err := Check(dir); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("check after the cut: %v %+v", err, rep)
	}
	p, err = pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 8 {
		_, closer, err := p.Get(fmt.Appendf(nil, "k%d", i))
		if err == nil {
			closer.Close()
		}
		if kept := i == 0; kept != (err == nil) {
			t.Errorf("k%d after the cut: %v (kept: %v)", i, err, kept)
		}
	}
}

// A store open in this process (as in another: Pebble's lock) makes CheckNotInUse, Check and a
// second Open say that another server uses the directory.
func TestADirectoryInUseIsRefusedSayingSo(t *testing.T) {
	db, dir := openTemp(t)
	if err := CheckNotInUse(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("CheckNotInUse: %v", err)
	}
	if _, err := Check(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("Check: %v", err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrInUse) || err.Error() != "another fila-server is using "+dir+
		" (it holds "+filepath.Join(dir, "LOCK")+"); stop it first, or give this one another data_dir" {
		t.Fatalf("a second Open: %v", err)
	}
	db.Close()
	if err := CheckNotInUse(dir); err != nil {
		t.Fatalf("CheckNotInUse once closed: %v", err)
	}
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// A checkpoint into another file system (where nothing can be hard-linked) is copied there whole,
// and is as sound.
func TestCheckpointOntoAnotherFileSystem(t *testing.T) {
	other, err := os.MkdirTemp("/dev/shm", "fila-checkpoint-")
	if err != nil {
		t.Skipf("no /dev/shm to checkpoint onto: %v", err)
	}
	defer os.RemoveAll(other)
	db, dir := openTemp(t)
	defer db.Close()
	if err := os.Link(filepath.Join(dir, "space-reserve"), filepath.Join(other, "probe")); err == nil {
		t.Skip("/dev/shm is on the store's file system")
	}
	storeEnqueue(t, db, "q", 1, []ID{{1}}, "one")
	cp := filepath.Join(other, "cp")
	if err := db.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	if rep, err := Check(cp); err != nil || len(rep.Problems) > 0 || rep.Keys == 0 {
		t.Fatalf("check of the checkpoint: %v %+v", err, rep)
	}
}
