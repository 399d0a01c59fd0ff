package modproxy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/tools/internal/repo"
)

// repoRoot is the directory holding go.work above the working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Skip(err)
	}
	return root
}

// headVersion is the pseudo-version of the checked-out commit, or of a placeholder commit when
// git cannot tell (an exported tree).
func headVersion(root string) (string, time.Time) {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%H %ct").Output()
	if f := strings.Fields(string(out)); err == nil && len(f) == 2 {
		if sec, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			t := time.Unix(sec, 0)
			return PseudoVersion(t, f[0]), t
		}
	}
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return PseudoVersion(t, "000000000000"), t
}

const consumerMain = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/client/rift"
)

func main() {
	c, err := fila.Dial(context.Background(), "127.0.0.1:5555", &fila.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	_, err = c.Enqueue(context.Background(), fila.Message{Queue: "orders", Payload: []byte("hello")})
	fmt.Println(err, rift.WithTimeout(0) != nil)
}
`

// A program in its own module requires the SDK at a pseudo-version, with no replace lines, and
// builds: the SDK's modules come from a file-based proxy (published from this tree as a release
// would be), third-party modules from the local module cache, nothing from the network.
func TestOutsideModuleBuildsAgainstTheSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module outside the workspace")
	}
	root := repoRoot(t)
	version, at := headVersion(root)
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	if err := Publish(proxy, version, at, []Module{
		{Path: "github.com/filamq/fila/client", Dir: filepath.Join(root, "client")},
		{Path: "github.com/filamq/fila/generated", Dir: filepath.Join(root, "generated")},
		{Path: "github.com/filamq/fila/lua", Dir: filepath.Join(root, "lua")},
	}); err != nil {
		t.Fatal(err)
	}
	published, err := os.ReadFile(filepath.Join(proxy, "github.com/filamq/fila/client/@v", version+".mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(published), "replace") || !strings.Contains(string(published), "github.com/filamq/fila/generated "+version) {
		t.Fatalf("the published client go.mod keeps a replace or does not require generated at %s:\n%s", version, published)
	}

	app := filepath.Join(tmp, "consumer")
	goMod := "module example.com/consumer\n\ngo 1.26\n\nrequire github.com/filamq/fila/client " + version + "\n"
	for name, data := range map[string]string{"go.mod": goMod, "main.go": consumerMain} {
		if err := os.MkdirAll(app, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(app, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goEnv, err := exec.Command("go", "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	realCache, upstream, _ := strings.Cut(strings.TrimSpace(string(goEnv)), "\n")
	// Our modules from the published tree; third-party ones from this machine's module cache
	// (itself a file proxy), so no network is needed when the cache is warm — and the configured
	// proxy after that, for a machine whose cache lacks a version the SDK alone requires.
	proxies := "file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(realCache, "cache", "download"))
	if upstream != "" && upstream != "off" {
		proxies += "," + upstream
	}
	modCache := filepath.Join(tmp, "modcache")
	env := append(os.Environ(),
		"GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOMODCACHE="+modCache, "GOPROXY="+proxies)
	t.Cleanup(func() {
		clean := exec.Command("go", "clean", "-modcache")
		clean.Env = env
		clean.Run()
	})
	build := exec.Command("go", "build", "-o", filepath.Join(tmp, "consumer-bin"), ".")
	build.Dir, build.Env = app, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of a module requiring github.com/filamq/fila/client %s: %v\n%s", version, err, out)
	}
	resolved, err := os.ReadFile(filepath.Join(app, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(resolved), "replace") || !strings.Contains(string(resolved), "github.com/filamq/fila/generated "+version) {
		t.Errorf("the consumer's go.mod after the build:\n%s", resolved)
	}
}
