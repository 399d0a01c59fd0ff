package storage

import (
	"testing"

	"github.com/filamq/fila/server/internal/importrule"
)

// The store is below the state machines it keeps: of this module's packages it uses only the
// generated store records and the Raft store under it. What it needs from a queue group's log
// entries (where the bodies are) the caller hands it (EntryBodies).
func TestImportsNothingAboveTheRaftStore(t *testing.T) {
	imps, err := importrule.Of(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range imps {
		if importrule.Within(imp.Path, "") && !importrule.Within(imp.Path, "generated/store") &&
			!importrule.Within(imp.Path, "server/raftstore") {
			t.Errorf("%s imports %s; storage may import only generated/store and server/raftstore of this module", imp.At, imp.Path)
		}
	}
}
