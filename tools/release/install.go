package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// checkInstall installs fila and fila-server from the published modules as a user would, with
// go install pkg@version outside any module (which refuses a module with replace lines), and
// checks each prints version. The modules of the release come from modulesDir; third-party
// ones from this machine's module cache, then the configured proxy.
func checkInstall(modulesDir, version string, log io.Writer) error {
	start := time.Now()
	tmp, err := os.MkdirTemp("", "fila-release-install-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	goEnv, err := exec.Command("go", "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		return fmt.Errorf("go env: %w", err)
	}
	realCache, upstream, _ := strings.Cut(strings.TrimSpace(string(goEnv)), "\n")
	proxies := "file://" + filepath.ToSlash(modulesDir) + ",file://" + filepath.ToSlash(filepath.Join(realCache, "cache", "download"))
	if upstream != "" && upstream != "off" {
		proxies += "," + upstream
	}
	bin := filepath.Join(tmp, "bin")
	// GOSUMDB=off: the checksum database has not seen the release yet. GOFLAGS has none of this
	// machine's, only -trimpath: the module cache is a new directory each time, and without it
	// every package would compile again on every run.
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-trimpath", "GOSUMDB=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0",
		"GOBIN="+bin, "GOMODCACHE="+filepath.Join(tmp, "modcache"), "GOPROXY="+proxies)
	defer func() { // the module cache is read-only: go clean removes it
		clean := exec.Command("go", "clean", "-modcache")
		clean.Dir, clean.Env = tmp, env
		clean.Run()
	}()
	for _, b := range binaries {
		pkg := "github.com/filamq/fila/" + strings.TrimPrefix(b.pkg, "./") + "@" + version
		cmd := exec.Command("go", "install", pkg)
		cmd.Dir, cmd.Env = tmp, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go install %s outside the repository: %v\n%s", pkg, err, out)
		}
		arg := "--version"
		if b.name == "fila" {
			arg = "version"
		}
		out, err := exec.Command(filepath.Join(bin, b.name), arg).CombinedOutput()
		if want := b.name + " " + version + " "; err != nil || !strings.HasPrefix(string(out), want) {
			return fmt.Errorf("%s %s after go install %s: %v: %q, want %q…", b.name, arg, pkg, err, out, want)
		}
	}
	fmt.Fprintf(log, "go install: fila and fila-server @%s installed from %s outside the workspace and print their version (%s)\n",
		version, modulesDir, time.Since(start).Round(time.Second))
	return nil
}
