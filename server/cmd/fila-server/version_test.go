package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

var versionLine = regexp.MustCompile(`^fila-server (devel|v\S+) \(commit ([0-9a-f]{40}(?:-dirty)?|unknown), (go\S+)\)\n$`)

// binaryVersion runs bin --version and returns its version, commit and Go version.
func binaryVersion(t *testing.T, bin string) (version, commit, goVersion string) {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	m := versionLine.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("--version printed %q, want %s", out, versionLine)
	}
	return m[1], m[2], m[3]
}

// buildInfoLine is the fila_build_info sample /metrics must show for bin.
func buildInfoLine(t *testing.T, bin string) string {
	version, commit, goVersion := binaryVersion(t, bin)
	return fmt.Sprintf(`fila_build_info{commit=%q,go_version=%q,version=%q} 1`, commit, goVersion, version)
}

func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server binary")
	}
	bin := buildServer(t)
	version, commit, goVersion := binaryVersion(t, bin)
	if goVersion != runtime.Version() {
		t.Errorf("go version %s, want %s", goVersion, runtime.Version())
	}
	// Built from the repository (no tagged module): "devel" and, where git works, the checkout's
	// commit.
	if version != "devel" {
		t.Errorf("version %q, want devel for a build from the source tree", version)
	}
	// (The go command does not stamp builds in a linked git worktree: there commit is unknown.)
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && !linkedWorktree(".") {
		if want := strings.TrimSpace(string(head)); strings.TrimSuffix(commit, "-dirty") != want {
			t.Errorf("commit %q, want %s (git rev-parse HEAD)", commit, want)
		}
	} else {
		t.Logf("no git here (%v): commit %q not checked", err, commit)
	}
	// --version wins over every other setting, even bad ones: nothing is opened.
	out, err := exec.Command(bin, "--version", "--data-dir", "").CombinedOutput()
	if err != nil || !versionLine.Match(out) {
		t.Fatalf("--version with a bad setting: %v\n%s", err, out)
	}
}

// linkedWorktree reports whether dir is in a linked git worktree (git worktree add).
func linkedWorktree(dir string) bool {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir").Output()
	f := strings.Fields(string(out))
	return err == nil && len(f) == 2 && f[0] != f[1]
}
