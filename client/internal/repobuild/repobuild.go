// Package repobuild builds the repository's binaries for tests that run them as subprocesses —
// the client module may not import the server, so its end-to-end tests start a real fila-server.
package repobuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Root returns the repository root: the nearest directory at or above the working directory
// that holds go.work.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// Build runs `go build -trimpath -o out pkg` with cgo off at the repository root; pkg is relative to it, such as
// "./server/cmd/fila-server".
func Build(out, pkg string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	// Built as the image builds it (CGO_ENABLED=0 -trimpath, deploy/Dockerfile), the configuration
	// make test compiles in, so that the build reuses its cache.
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
