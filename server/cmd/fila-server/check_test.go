package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/filamq/fila/server/broker"
)

// dataDir makes a real data directory holding n acknowledged messages, the server stopped.
// A small memtable makes Pebble flush sstables and blob files.
func dataDir(t *testing.T, n int, memtable uint64) string {
	t.Helper()
	dir := t.TempDir()
	o := broker.DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Storage.MemTableBytes = memtable
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if e := b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	for i := 0; i < n; i += 100 {
		msgs := make([]broker.Message, 100)
		for j := range msgs {
			msgs[j] = broker.Message{Queue: "q", Payload: fmt.Appendf(nil, "message %08d %s", i+j, strings.Repeat("p", 80))}
		}
		done := make(chan *broker.Error, 1)
		b.Enqueue(msgs, func(_ []broker.EnqueueResult, e *broker.Error) { done <- e })
		if e := <-done; e != nil {
			t.Fatal(e)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCheck(dir string) (int, string) {
	var out, errs bytes.Buffer
	code := check([]string{"--data-dir", dir}, &out, &errs)
	return code, out.String() + errs.String()
}

// fila-server check passes a sound directory, and names the file of each damage.
func TestCheckCommand(t *testing.T) {
	dir := dataDir(t, 5_000, 0)
	if code, out := runCheck(dir); code != 0 || !strings.Contains(out, "ok: no damage found") {
		t.Fatalf("check of a sound directory: %d\n%s", code, out)
	}

	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(logs)
	wal := logs[len(logs)-1]
	data, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	// The middle of its records: a new WAL is zero-filled ahead of its appends (server/storage/walfill.go).
	mid := len(bytes.TrimRight(data, "\x00")) / 2
	for i := mid; i < mid+64; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(wal, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runCheck(dir); code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, filepath.Base(wal)) {
		t.Fatalf("check of a damaged WAL: %d\n%s", code, out)
	}

	markers, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*"))
	for _, m := range markers {
		os.Remove(m)
	}
	if code, out := runCheck(dir); code != 1 || !strings.Contains(out, "marker.manifest") {
		t.Fatalf("check without a manifest marker: %d\n%s", code, out)
	}
	if code, out := runCheck(filepath.Join(dir, "nope")); code != 2 {
		t.Fatalf("check of a missing directory: %d\n%s", code, out)
	}
	if code, _ := runCheck(""); code != 2 {
		t.Fatalf("check without --data-dir: %d", code)
	}
}

// A damaged sstable is found by reading it.
func TestCheckFindsDamagedTable(t *testing.T) {
	dir := dataDir(t, 20_000, 256<<10)
	var files []string
	for _, pat := range []string{"*.sst", "*.blob"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no sstable or blob file written")
	}
	sort.Slice(files, func(i, j int) bool { return size(files[i]) > size(files[j]) })
	data, _ := os.ReadFile(files[0])
	for i := len(data) / 3; i < len(data)/3+64; i++ {
		data[i] ^= 0xff
	}
	os.WriteFile(files[0], data, 0o644)
	if code, out := runCheck(dir); code != 1 {
		t.Fatalf("check of a damaged %s: %d\n%s", filepath.Base(files[0]), code, out)
	} else {
		t.Log(out)
	}
}

func size(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// A start that reads a damaged table (the queue log's tail and its bodies) stops with an error
// naming the file, rather than recovering messages without their bodies.
func TestDamagedTableStopsTheStart(t *testing.T) {
	dir := dataDir(t, 20_000, 256<<10)
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(files) == 0 {
		t.Fatal("no sstable written")
	}
	sort.Slice(files, func(i, j int) bool { return size(files[i]) > size(files[j]) })
	data, _ := os.ReadFile(files[0])
	for i := len(data) / 3; i < len(data)/3+64; i++ {
		data[i] ^= 0xff
	}
	os.WriteFile(files[0], data, 0o644)
	o := broker.DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(o)
	if err == nil {
		b.Close()
		t.Fatalf("started on a damaged %s", filepath.Base(files[0]))
	}
	num := strings.TrimSuffix(filepath.Base(files[0]), ".sst")
	if !strings.Contains(err.Error(), "file "+num) {
		t.Fatalf("start on a damaged table: %v, want the file %s named", err, num)
	}
}
