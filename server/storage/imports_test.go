package storage

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The store is below the state machines it keeps: of this module's packages it uses only the
// generated store records and the Raft store under it. What it needs from a queue group's log
// entries (where the bodies are) the caller hands it (EntryBodies).
func TestImportsNothingAboveTheRaftStore(t *testing.T) {
	allowed := map[string]bool{
		"github.com/filamq/fila/generated/store":  true,
		"github.com/filamq/fila/server/raftstore": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(path, "github.com/filamq/fila/") && !allowed[path] {
				t.Errorf("%s imports %s; storage may import only %v of this module", fset.Position(imp.Pos()), path, []string{
					"generated/store", "server/raftstore"})
			}
		}
	}
}
