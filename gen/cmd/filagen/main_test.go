package main

import (
	"os"
	"path/filepath"
	"testing"
)

const fixture = "../../spec/testdata/minimal.yaml"

// TestRunWritesThenChecks generates the fixture into an empty folder, expects -check to find
// nothing stale, then damages one file and adds a stray generated one and expects -check to name
// both and a second write to repair them, leaving hand-written files and no temporary files.
func TestRunWritesThenChecks(t *testing.T) {
	dir := t.TempDir()
	handWritten := filepath.Join(dir, "doc.go")
	if err := os.WriteFile(handWritten, []byte("package mini\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(fixture, dir, "spec/mini.yaml", "", false); err != nil {
		t.Fatal(err)
	}
	if stale, err := run(fixture, dir, "spec/mini.yaml", "", true); err != nil || len(stale) != 0 {
		t.Fatalf("fresh output is stale: %v %v", stale, err)
	}
	damaged, stray := filepath.Join(dir, "protocol.gen.go"), filepath.Join(dir, "old.gen.go")
	for _, p := range []string{damaged, stray} {
		if err := os.WriteFile(p, []byte("package mini\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := run(fixture, dir, "spec/mini.yaml", "", true)
	if err != nil || len(stale) != 2 || stale[0] != damaged || stale[1] != stray {
		t.Fatalf("check found %v %v, want %s and %s", stale, err, damaged, stray)
	}
	if _, err := run(fixture, dir, "spec/mini.yaml", "", false); err != nil {
		t.Fatal(err)
	}
	if stale, _ := run(fixture, dir, "spec/mini.yaml", "", true); len(stale) != 0 {
		t.Fatalf("still stale after a write: %v", stale)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("stray generated file survived: %v", err)
	}
	if _, err := os.Stat(handWritten); err != nil {
		t.Errorf("hand-written file removed: %v", err)
	}
}

func TestRunRefusesAnUndocumentedSpec(t *testing.T) {
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(string(data[:len(data)-1])+"\n  - {opcode: 2, name: Bye, direction: server, group: main}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := run(bad, out, "bad.yaml", "", false); err == nil || err.Error() != bad+":50: frame Bye has no doc" {
		t.Fatalf("got %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Fatalf("a refused spec wrote %d files", len(entries))
	}
}
