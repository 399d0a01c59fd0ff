package engine

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The engine is pure (doc.go): it imports only the standard library, so no I/O, goroutine or
// clock reaches it but through its arguments (an Allocator among them). Its tests may import
// more (server/offheap, rapid).
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files { // every file, whatever its build constraints
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !standard(path) {
				t.Errorf("%s imports %q, which is not in the standard library", fset.Position(imp.Pos()), path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source file found")
	}
}

// standard reports whether path names a package of the standard library: its first element has
// no dot (a module path starts with a domain), as the go command decides, and it is not cgo's
// "C" (calls into C are I/O the engine must not do either).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && path != "C"
}
