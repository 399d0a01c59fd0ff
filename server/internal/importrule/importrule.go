// Package importrule reads what a package's files import, for the tests that keep the server's
// import rules (docs/cluster.md lists them): the engine imports only the standard library, the
// store nothing above the Raft store, meta and queuegroup never the broker, the edges only the
// service. It reads the files as text (go/parser), every file whatever its build constraints, so a
// rule holds on every platform.
package importrule

import (
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
)

// Module is the path every package of this repository's modules starts with.
const Module = "github.com/filamq/fila/"

// Import is one import of a file.
type Import struct {
	Path string // the imported package
	At   string // file:line of the import
}

// Of returns the imports of the non-test Go files in dir. It fails when dir has none, so that a
// rule cannot hold vacuously on a directory that moved.
func Of(dir string) ([]Import, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []Import
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		read++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fset.Position(imp.Pos()), err)
			}
			out = append(out, Import{Path: path, At: fset.Position(imp.Pos()).String()})
		}
	}
	if read == 0 {
		return nil, fmt.Errorf("importrule: no Go source file in %s", dir)
	}
	return out, nil
}

// Standard reports whether path names a package of the standard library: its first element has
// no dot (a module path starts with a domain), as the go command decides, and it is not cgo's "C".
func Standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && path != "C"
}

// Within reports whether path is pkg (a path below Module, such as "server/broker") or a package
// below it; "" stands for every package of the repository.
func Within(path, pkg string) bool {
	if pkg == "" {
		return strings.HasPrefix(path, Module)
	}
	p := Module + pkg
	return path == p || strings.HasPrefix(path, p+"/")
}
