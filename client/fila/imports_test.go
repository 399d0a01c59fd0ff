package fila

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/filamq/fila/client/internal/repobuild"
)

// TestImportDirection keeps the client module independent of the server: nothing under client/
// may import a server package.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "github.com/filamq/fila/client/...").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/filamq/fila/server") {
			t.Errorf("client depends on %s", pkg)
		}
	}
}

// TestApplicationsNeedNoGeneratedCode keeps the SDK sufficient for an application's common work:
// the programs under examples/ and the godoc Examples (example_test.go) import nothing from
// generated/ (fibp, wire); the SDK names what they need (enums.go, MessageID, Key).
func TestApplicationsNeedNoGeneratedCode(t *testing.T) {
	root, err := repobuild.Root()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"example_test.go"}
	err = filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: examples/ moved?", files)
	}
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/filamq/fila/generated/") {
				t.Errorf("%s imports %s: give the SDK a name for what it needs", path, p)
			}
		}
	}
}
