package meta

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/filamq/fila/server/internal/importrule"
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

// imports lists what the non-test Go files of the package in dir import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	imps, err := importrule.Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(imps))
	for i, imp := range imps {
		out[i] = imp.Path
	}
	return out
}
