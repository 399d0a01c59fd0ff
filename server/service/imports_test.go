package service

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/filamq/fila/"

// forbidden lists, for each package of the seam, the packages its non-test files must not import:
// the edges reach the queue service only through this package, and this package stays below
// the broker, the engine, the storage codecs and FIBP.
var forbidden = map[string][]string{
	"../session":   {"server/broker", "server/engine", "server/storage", "generated/store"},
	"../transport": {"server/broker", "server/engine", "server/storage", "generated/store"},
	".": {"server/broker", "server/engine", "server/storage", "server/queuegroup", "generated/store",
		"generated/fibp", "generated/queuelog", "server/session", "server/transport"},
}

// TestImportRules parses the non-test files of the edges and of this package and fails on an
// import the seam forbids.
func TestImportRules(t *testing.T) {
	for dir, banned := range forbidden {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range banned {
					if p == module+b || strings.HasPrefix(p, module+b+"/") {
						t.Errorf("%s imports %s", path, p)
					}
				}
			}
		}
	}
}
