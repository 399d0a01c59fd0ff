package fila

import (
	"os/exec"
	"strings"
	"testing"
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
