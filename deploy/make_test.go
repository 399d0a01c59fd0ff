package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// make test works on a machine without a C compiler: the race detector half says it is skipped
// and runs the same packages without it (here CC names a compiler that does not exist). The
// package is one with no dependencies outside the standard library: this test runs while the rest
// of make test compiles, and a package of the server would be compiled once more for it.
func TestMakeTestWithoutACCompiler(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", "..", "race-if-cgo", "RACE_PKGS=./generated/wire")
	// CGO_ENABLED=1: make test runs this package with cgo off (see the Makefile), which the
	// target would report instead of the missing compiler.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CC=/nonexistent/cc")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "race detector skipped: it needs cgo and a C compiler, and here no C compiler") ||
		!strings.Contains(string(out), "ok  \tgithub.com/filamq/fila/generated/wire") {
		t.Fatalf("make race-if-cgo without a C compiler: %v\n%s", err, out)
	}
}
