package meta

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The import rule: meta and queuegroup never import the broker, directly or through another
// package of the server module. The broker drives them; they know nothing of it.
func TestNeverImportsBroker(t *testing.T) {
	const module = "github.com/filamq/fila/server/"
	const forbidden = module + "broker"
	for _, root := range []string{"meta", "queuegroup"} {
		var path []string // the importers above pkg
		seen := map[string]bool{}
		var walk func(pkg string)
		walk = func(pkg string) {
			if seen[pkg] {
				return
			}
			seen[pkg] = true
			for _, imp := range imports(t, filepath.Join("..", strings.TrimPrefix(pkg, module))) {
				if imp == forbidden || strings.HasPrefix(imp, forbidden+"/") {
					t.Errorf("%s imports %s", strings.Join(append(path, pkg), " → "), imp)
					continue
				}
				if strings.HasPrefix(imp, module) {
					path = append(path, pkg)
					walk(imp)
					path = path[:len(path)-1]
				}
			}
		}
		walk(module + root)
	}
}

// imports lists what the non-test Go files of the package in dir import, each once.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
