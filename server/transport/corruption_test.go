package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/storage"
)

// populate writes n acknowledged messages to queue q in a new data directory and stops the
// server cleanly; the messages are in the newest WAL (a memtable is not flushed at close).
func populate(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	b := openQuiet(t, dir)
	c := dialRaw(t, serveBroker(t, b))
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	for i := 0; i < n; i += 100 {
		msgs := make([]fibp.EnqueueMessage, 100)
		for j := range msgs {
			msgs[j] = fibp.EnqueueMessage{Queue: "q", Payload: []byte(fmt.Sprintf("message %08d %s", i+j, strings.Repeat("p", 80)))}
		}
		enqueue(t, c, msgs...)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openQuiet(t *testing.T, dir string) *broker.Broker {
	t.Helper()
	b, err := openBroker(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBroker(dir string) (*broker.Broker, error) {
	o := broker.DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return broker.Open(o)
}

// copyDir copies a data directory for one damage.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// newestWAL returns the path of the data directory's newest WAL file.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no WAL in the data directory")
	}
	sort.Strings(logs)
	return logs[len(logs)-1]
}

func depth(t *testing.T, b *broker.Broker) uint64 {
	t.Helper()
	c := dialRaw(t, serveBroker(t, b))
	c.Handshake()
	return stats(t, c, "q").Depth
}

// written is how much of a WAL holds records: the file up to its zeroed rest (a new WAL is
// zero-filled ahead of its appends, server/storage/walfill.go).
func written(data []byte) int {
	return len(bytes.TrimRight(data, "\x00"))
}

// flip inverts 64 bytes of path at frac of its records.
func flip(t *testing.T, path string, frac float64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := int(float64(written(data)) * frac)
	for i := at; i < at+64 && i < len(data); i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// listing is the names and sizes of a directory's files.
func listing(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			info, _ := d.Info()
			out[strings.TrimPrefix(path, dir)] = info.Size()
		}
		return nil
	})
	return out
}

// Bytes flipped anywhere in the newest WAL but its last block stop the start with an error that
// names the file, and change nothing (Pebble alone starts on some of these and drops every
// acknowledged message after the damage).
func TestDamagedWALStopsTheStart(t *testing.T) {
	const n = 20_000
	src := populate(t, n)
	for _, frac := range []float64{0.01, 0.25, 0.5, 0.75, 0.9} {
		dir := copyDir(t, src)
		wal := newestWAL(t, dir)
		flip(t, wal, frac)
		before := listing(t, dir)
		b, err := openBroker(dir)
		if err == nil {
			d := depth(t, b)
			b.Close()
			t.Fatalf("flipped at %.2f of the WAL: started with %d of %d messages", frac, d, n)
		}
		if !errors.Is(err, storage.ErrDamaged) || !strings.Contains(err.Error(), filepath.Base(wal)) {
			t.Fatalf("flipped at %.2f: %v, want a damage error naming %s", frac, err, filepath.Base(wal))
		}
		if after := listing(t, dir); !maps.Equal(before, after) {
			t.Fatalf("a refused start changed the directory:\n%v\n%v", before, after)
		}
	}
}

// With salvage, the start goes on without what follows the damage, keeps the original WAL, and
// everything before the damage is there.
func TestSalvageDamagedWAL(t *testing.T) {
	const n = 20_000
	dir := copyDir(t, populate(t, n))
	wal := newestWAL(t, dir)
	flip(t, wal, 0.5)
	o := broker.DefaultOptions(dir)
	var logs bytes.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	o.Storage.Salvage = true
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if d := depth(t, b); d == 0 || d >= n {
		t.Fatalf("salvaged queue holds %d of %d messages", d, n)
	}
	if !strings.Contains(logs.String(), "salvaged a damaged WAL") || !strings.Contains(logs.String(), "records_dropped=") {
		t.Fatalf("no salvage report in the log:\n%s", logs.String())
	}
	if _, err := os.Stat(wal + ".damaged"); err != nil {
		t.Fatalf("the damaged original is not kept: %v", err)
	}
}

// A WAL cut short, as a crash leaves it, still starts: a torn tail is not damage.
func TestTornWALTailStarts(t *testing.T) {
	dir := copyDir(t, populate(t, 2_000))
	wal := newestWAL(t, dir)
	data, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(wal, int64(written(data))-100); err != nil {
		t.Fatal(err)
	}
	b, err := openBroker(dir)
	if err != nil {
		t.Fatalf("a torn WAL tail refused the start: %v", err)
	}
	b.Close()
}

// A crash inside Pebble's Open, after it flushed a torn newest WAL and created the next one but
// before it deleted the old, leaves the torn WAL beside its successor. Pebble no longer replays
// it, so it is not damage: the start goes on with every message the flush kept, and the offline
// check agrees.
func TestStaleTornWALBesideItsSuccessorStarts(t *testing.T) {
	dir := copyDir(t, populate(t, 2_000))
	wal := newestWAL(t, dir)
	data, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	torn := data[:written(data)-100]
	if err := os.WriteFile(wal, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	b := openQuiet(t, dir) // replays the torn WAL, flushes it, starts a new one, deletes it
	want := depth(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if newestWAL(t, dir) <= wal {
		t.Fatalf("no WAL newer than %s after the start", wal)
	}
	if err := os.WriteFile(wal, torn, 0o644); err != nil { // as the crash before the delete left it
		t.Fatal(err)
	}
	rep, err := storage.Check(dir)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("check of a stale torn WAL: %v %v", err, rep.Problems)
	}
	b, err = openBroker(dir)
	if err != nil {
		t.Fatalf("a stale torn WAL refused the start: %v", err)
	}
	defer b.Close()
	if got := depth(t, b); got != want || want == 0 {
		t.Fatalf("started with %d messages, want the %d the first start kept", got, want)
	}
}

// A directory with data but without its manifest marker is refused, and nothing in it deleted.
func TestMissingManifestMarkerIsRefused(t *testing.T) {
	dir := copyDir(t, populate(t, 500))
	markers, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*"))
	if len(markers) == 0 {
		t.Fatal("no manifest marker in a real data directory")
	}
	for _, m := range markers {
		os.Remove(m)
	}
	before := listing(t, dir)
	b, err := openBroker(dir)
	if err == nil {
		b.Close()
		t.Fatal("started on a directory without its manifest marker")
	}
	if !errors.Is(err, storage.ErrDamaged) || !strings.Contains(err.Error(), "marker.manifest") {
		t.Fatalf("start without a manifest marker: %v", err)
	}
	if after := listing(t, dir); !maps.Equal(before, after) {
		t.Fatalf("a refused start changed the directory:\n%v\n%v", before, after)
	}
}
