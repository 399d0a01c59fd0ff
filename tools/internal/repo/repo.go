// Package repo finds the repository the tools run in.
package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Root returns the nearest directory at or above the working directory that holds go.work.
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
			return "", errors.New("no go.work above the working directory: run inside the repository")
		}
		dir = parent
	}
}

// BuildServer compiles fila-server from the repository into dir and returns its path. The build
// runs in its own process group, killed as a whole when ctx ends.
func BuildServer(ctx context.Context, dir string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "fila-server")
	// Built as the image builds it (CGO_ENABLED=0 -trimpath, deploy/Dockerfile), the configuration
	// make test compiles in, so that the build reuses its cache.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./server/cmd/fila-server")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fila-server: %w\n%s", err, bytes.TrimSpace(out))
	}
	return bin, nil
}
