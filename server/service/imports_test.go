package service

import (
	"testing"

	"github.com/filamq/fila/server/internal/importrule"
)

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
		imps, err := importrule.Of(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range imps {
			for _, b := range banned {
				if importrule.Within(imp.Path, b) {
					t.Errorf("%s imports %s", imp.At, imp.Path)
				}
			}
		}
	}
}
