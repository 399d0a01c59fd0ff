package emit

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/filamq/fila/gen/check"
	"github.com/filamq/fila/gen/spec"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files under testdata/golden from the emitter's output")

// TestGolden compares every file emitted for the fixture specs with its golden copy in
// testdata/golden/<fixture>/, byte for byte. After an intended change to the emitter, run
// `go test ./gen/emit -run TestGolden -rewrite` and review the diff.
func TestGolden(t *testing.T) {
	for name, path := range map[string]string{
		"minimal": "../spec/testdata/minimal.yaml",
		"header":  "testdata/header.yaml",
	} {
		t.Run(name, func(t *testing.T) {
			s, err := spec.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if errs := check.Check(s); errs != nil {
				t.Fatal(errs)
			}
			files, err := Files(s, "testdata/"+name+".yaml")
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("testdata", "golden", name)
			if *rewrite {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for fn, src := range files {
					// .golden keeps the go tool from compiling the copies as part of this package.
					if err := os.WriteFile(filepath.Join(dir, fn+".golden"), src, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create the golden files)", err)
			}
			var want []string
			for _, ent := range entries {
				want = append(want, ent.Name())
			}
			var got []string
			for fn := range files {
				got = append(got, fn+".golden")
			}
			sort.Strings(got)
			if !equalStrings(got, want) {
				t.Fatalf("emitted files %v, golden files %v", got, want)
			}
			for fn, src := range files {
				golden, err := os.ReadFile(filepath.Join(dir, fn+".golden"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(src, golden) {
					t.Errorf("%s differs from %s (rerun with -rewrite and review the diff)", fn, filepath.Join(dir, fn+".golden"))
				}
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
