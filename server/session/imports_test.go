package session

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection keeps the layers apart: transport → session → broker. The broker knows
// nothing of FIBP frames (generated/fibp) and nothing of the session or the transport.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/filamq/fila/server/broker").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/filamq/fila/generated/fibp", "github.com/filamq/fila/server/session", "github.com/filamq/fila/server/transport":
			t.Errorf("server/broker depends on %s", pkg)
		}
	}
}
