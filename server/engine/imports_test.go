package engine

import (
	"testing"

	"github.com/filamq/fila/server/internal/importrule"
)

// The engine is pure (doc.go): it imports only the standard library, so no I/O, goroutine or
// clock reaches it but through its arguments (an Allocator among them). Its tests may import
// more (server/offheap, rapid).
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	imps, err := importrule.Of(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range imps {
		if !importrule.Standard(imp.Path) {
			t.Errorf("%s imports %q, which is not in the standard library", imp.At, imp.Path)
		}
	}
}
