package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// userProgram is a user's program of its own module: it needs the SDK (client/fila) and, through
// it, generated.
const userProgram = `package main

import (
	"context"
	"fmt"

	"github.com/filamq/fila/client/fila"
)

func main() {
	_, err := fila.Dial(context.Background(), "127.0.0.1:1", &fila.Options{})
	fmt.Println(err != nil)
}
`

// checkGoGetFromTags fetches the SDK as a user outside the repository does, with plain `go get
// github.com/filamq/fila/client@version`, from the tags of the git repository at repoDir alone:
// the go command reads the repository as it would https://github.com/filamq/fila (git's
// url.insteadOf points that URL at repoDir), which is how the public module proxy makes a
// version, and resolves every other module of the repository the client needs (generated, lua)
// from their tags too; the CLI's package (which needs lua as well) resolves from them too.
// Third-party modules come from this machine's module cache.
func checkGoGetFromTags(t *testing.T, repoDir, version string) {
	t.Helper()
	tmp := t.TempDir()
	gitConfig := filepath.Join(tmp, "gitconfig")
	if err := os.WriteFile(gitConfig, []byte("[url \"file://"+filepath.ToSlash(repoDir)+"\"]\n\tinsteadOf = https://github.com/filamq/fila\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(tmp, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"go.mod": "module example.com/app\n\ngo 1.26\n", "main.go": userProgram} {
		if err := os.WriteFile(filepath.Join(app, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goEnv, err := exec.Command("go", "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	realCache, upstream, _ := strings.Cut(strings.TrimSpace(string(goEnv)), "\n")
	proxies := "file://" + filepath.ToSlash(filepath.Join(realCache, "cache", "download"))
	if upstream != "" && upstream != "off" {
		proxies += "," + upstream
	}
	modCache := filepath.Join(tmp, "modcache")
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0",
		"GOMODCACHE="+modCache, "GOPROXY="+proxies, "GOPRIVATE=github.com/filamq", // ours straight from git, not a proxy
		"GIT_CONFIG_GLOBAL="+gitConfig, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	t.Cleanup(func() {
		clean := exec.Command("go", "clean", "-modcache")
		clean.Env = env
		clean.Run()
	})
	for _, args := range [][]string{{"get", "github.com/filamq/fila/client@" + version}, {"build", "-o", filepath.Join(tmp, "app-bin"), "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = app, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s, outside the repository, from its tags: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	resolved, err := os.ReadFile(filepath.Join(app, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"client", "generated"} {
		if !strings.Contains(string(resolved), "github.com/filamq/fila/"+m+" "+version) {
			t.Errorf("the user's go.mod after go get does not require github.com/filamq/fila/%s %s:\n%s", m, version, resolved)
		}
	}

	// The CLI's package, which needs lua too, resolves from the tags as well (go install
	// …@version from dist/modules is the release's own step 5; it is not built again here).
	for _, args := range [][]string{{"get", "github.com/filamq/fila/client/cmd/fila@" + version}, {"list", "-deps", "github.com/filamq/fila/client/cmd/fila"}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = app, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s, outside the repository, from its tags: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if resolved, _ := os.ReadFile(filepath.Join(app, "go.mod")); !strings.Contains(string(resolved), "github.com/filamq/fila/lua "+version) {
		t.Errorf("the user's go.mod after go get of the CLI does not require github.com/filamq/fila/lua %s:\n%s", version, resolved)
	}
}
