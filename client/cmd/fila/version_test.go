package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/filamq/fila/client/internal/repobuild"
)

// TestVersionBinary builds the real CLI (with VCS stamping, whatever GOFLAGS says) and checks
// `fila version` and `fila version --json` against the checkout.
func TestVersionBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI binary")
	}
	root, err := repobuild.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fila")
	// Built as the image builds it (CGO_ENABLED=0 -trimpath, deploy/Dockerfile), the configuration
	// make test compiles in, so that the build reuses its cache.
	build := exec.Command("go", "build", "-buildvcs=auto", "-trimpath", "-o", bin, "./client/cmd/fila")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// No broker is listening at --addr: version must not connect.
	out, err := exec.Command(bin, "--addr", "127.0.0.1:1", "version").CombinedOutput()
	line := regexp.MustCompile(`^fila (devel|v\S+) \(commit ([0-9a-f]{40}(?:-dirty)?|unknown), (go\S+)\)\n$`)
	m := line.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Fatalf("fila version: %v, printed %q, want %s", err, out, line)
	}
	if m[1] != "devel" || m[3] != runtime.Version() {
		t.Errorf("version %q and go %q, want devel (a source-tree build) and %s", m[1], m[3], runtime.Version())
	}
	head, gitErr := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	// (The go command does not stamp builds in a linked git worktree: there commit is unknown.)
	if gitErr == nil && !linkedWorktree(root) && strings.TrimSuffix(m[2], "-dirty") != strings.TrimSpace(string(head)) {
		t.Errorf("commit %q, want %s (git rev-parse HEAD)", m[2], head)
	}

	js, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("fila version --json: %v", err)
	}
	var got struct {
		Version, Commit, GoVersion string
		Modified                   bool
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatalf("fila version --json printed %q: %v", js, err)
	}
	got.Version, _ = raw["version"].(string)
	got.Commit, _ = raw["commit"].(string)
	got.GoVersion, _ = raw["go_version"].(string)
	got.Modified, _ = raw["modified"].(bool)
	if want := m[2]; got.Version != m[1] || got.GoVersion != m[3] || got.Commit != strings.TrimSuffix(want, "-dirty") ||
		got.Modified != strings.HasSuffix(want, "-dirty") {
		t.Errorf("--json %s disagrees with %q", js, out)
	}

	if out, err := exec.Command(bin, "version", "extra").CombinedOutput(); err == nil || !strings.Contains(string(out), "takes no arguments") {
		t.Errorf("fila version extra: %v\n%s", err, out)
	}
}

// linkedWorktree reports whether dir is in a linked git worktree (git worktree add).
func linkedWorktree(dir string) bool {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir").Output()
	f := strings.Fields(string(out))
	return err == nil && len(f) == 2 && f[0] != f[1]
}
