// Package deploy checks deploy/Dockerfile and deploy/fila-server.service without a container
// runtime or systemd: the Dockerfile's exact go build command line, the static binaries it makes
// and the version they print, the image's entrypoint and health check run against each other
// (with authentication off and on), and systemd-analyze verify.
package deploy

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	line int
	name string // upper case: RUN, COPY, HEALTHCHECK, …
	args string
}

func dockerfile(t *testing.T) []instruction {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur *instruction
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == nil && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur == nil {
			name, args, _ := strings.Cut(trimmed, " ")
			out = append(out, instruction{line: i + 1, name: strings.ToUpper(name)})
			cur = &out[len(out)-1]
			trimmed = args
		}
		more := strings.HasSuffix(trimmed, `\`)
		cur.args = strings.TrimSpace(cur.args + " " + strings.TrimSpace(strings.TrimSuffix(trimmed, `\`)))
		if !more {
			cur = nil
		}
	}
	return out
}

// only returns the single instruction named name whose arguments contain substr.
func only(t *testing.T, ins []instruction, name, substr string) instruction {
	t.Helper()
	var found []instruction
	for _, in := range ins {
		if in.name == name && strings.Contains(in.args, substr) {
			found = append(found, in)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the Dockerfile has %d %s instructions with %q, want 1", len(found), name, substr)
	}
	return found[0]
}

// execForm decodes an exec-form (JSON array) argument list.
func execForm(t *testing.T, in instruction, args string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile:%d: %s %s is not an exec-form JSON array: %v", in.line, in.name, args, err)
	}
	return argv
}

// imageVersion and imageCommit are the version and commit the tests build the image's binaries
// with (its VERSION and COMMIT arguments).
const (
	imageVersion = "v0.0.0-deploy-test"
	imageCommit  = "0123456789abcdef0123456789abcdef01234567"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildLikeTheImage runs the Dockerfile's go build command line at the repository root, with
// its output directory /out/ replaced by a temporary one, and returns that directory.
func buildLikeTheImage(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binaries as the image does")
	}
	run := only(t, dockerfile(t), "RUN", "go build")
	buildOnce.Do(func() {
		if !strings.Contains(run.args, "CGO_ENABLED=0 ") || !strings.Contains(run.args, " -o /out/ ") {
			buildErr = fmt.Errorf("Dockerfile:%d: %q: want CGO_ENABLED=0 and -o /out/", run.line, run.args)
			return
		}
		binDir, buildErr = os.MkdirTemp("", "fila-deploy-")
		if buildErr != nil {
			return
		}
		cmdline := strings.Replace(run.args, " -o /out/ ", " -o "+binDir+"/ ", 1)
		cmd := exec.Command("sh", "-c", cmdline)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "VERSION="+imageVersion, "COMMIT="+imageCommit) // as docker build --build-arg sets them
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("Dockerfile:%d: %s: %v\n%s", run.line, cmdline, err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func TestDockerfileBuildsStaticBinaries(t *testing.T) {
	dir := buildLikeTheImage(t)
	ins := dockerfile(t)
	if from := only(t, ins, "FROM", "AS build"); !strings.HasPrefix(from.args, "golang:1.26 ") {
		t.Errorf("Dockerfile:%d: builder is %q, want golang:1.26", from.line, from.args)
	}
	copyBins := only(t, ins, "COPY", "/out/fila-server")
	for _, name := range []string{"fila-server", "fila"} {
		path := filepath.Join(dir, name)
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked (%v): distroless/static has no libc", name, p.Type)
			}
		}
		f.Close()
		if !strings.Contains(copyBins.args, "/out/"+name+" ") {
			t.Errorf("Dockerfile:%d: %q does not copy %s into the image", copyBins.line, copyBins.args, name)
		}
	}
	// the Dockerfile's VERSION and COMMIT arguments are what both print
	for _, c := range [][]string{{"fila-server", "--version"}, {"fila", "version"}} {
		line := regexp.MustCompile(`^` + c[0] + ` ` + regexp.QuoteMeta(imageVersion) + ` \(commit ` + imageCommit + `, go\S+\)\n$`)
		if out, err := exec.Command(filepath.Join(dir, c[0]), c[1]).CombinedOutput(); err != nil || !line.Match(out) {
			t.Errorf("%s %s: %v\n%s", c[0], c[1], err, out)
		}
	}
}

// TestEntrypointAndHealthcheck runs the image's ENTRYPOINT and HEALTHCHECK command lines with the
// binaries built as the image builds them: the ports and /data are swapped for free ones. The
// server runs as docker run starts it, and with authentication on (FILA_BOOTSTRAP_API_KEY in the
// container's environment, which the health check shares): the check passes in both while the
// server serves, and fails once it has stopped.
func TestEntrypointAndHealthcheck(t *testing.T) {
	dir := buildLikeTheImage(t)
	ins := dockerfile(t)
	entry := only(t, ins, "ENTRYPOINT", "fila-server")
	health := only(t, ins, "HEALTHCHECK", "CMD")
	_, healthArgs, _ := strings.Cut(health.args, "CMD ")
	for _, want := range []string{`"--listen", "0.0.0.0:5555"`, `"--http-listen", "0.0.0.0:9555"`, `"--data-dir", "/data"`} {
		if !strings.Contains(entry.args, want) {
			t.Errorf("Dockerfile:%d: ENTRYPOINT lacks %s", entry.line, want)
		}
	}
	for _, want := range []string{"VOLUME /data", "EXPOSE 5555 9555"} {
		name, args, _ := strings.Cut(want, " ")
		only(t, ins, name, args)
	}
	if user := only(t, ins, "USER", ""); strings.HasPrefix(user.args, "0") || strings.HasPrefix(user.args, "root") {
		t.Errorf("Dockerfile:%d: USER %s runs as root", user.line, user.args)
	}
	const key = "deploy-test-bootstrap-key-0123456789abcdef"
	t.Run("authentication off", func(t *testing.T) {
		runImage(t, dir, entry, health, healthArgs, nil, "")
	})
	t.Run("authentication on", func(t *testing.T) {
		runImage(t, dir, entry, health, healthArgs, []string{"FILA_BOOTSTRAP_API_KEY=" + key}, key)
	})
}

// runImage starts the ENTRYPOINT with env added to the environment (the container's, which the
// HEALTHCHECK shares), waits for the health check to pass, checks /healthz and that a FIBP
// request needs apiKey (when not empty), stops the server with SIGTERM and checks the health
// check then fails.
func runImage(t *testing.T, dir string, entry, health instruction, healthArgs string, env []string, apiKey string) {
	addr, httpAddr, data := freeAddr(t), freeAddr(t), t.TempDir()
	swap := strings.NewReplacer("0.0.0.0:5555", addr, "127.0.0.1:5555", addr, "0.0.0.0:9555", httpAddr,
		"127.0.0.1:9555", httpAddr, "/usr/local/bin/", dir+"/")
	argv := execForm(t, entry, swap.Replace(entry.args))
	for i := range argv {
		if argv[i] == "/data" {
			argv[i] = data
		}
	}
	check := execForm(t, health, swap.Replace(healthArgs))
	containerEnv := append(os.Environ(), env...)
	healthy := func() (string, bool) {
		cmd := exec.Command(check[0], check[1:]...)
		cmd.Env = containerEnv
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}

	srv := exec.Command(argv[0], argv[1:]...)
	srv.Env = containerEnv
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, ok := healthy()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the health check never passed: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err := http.Get("http://" + httpAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "ok\n" {
		t.Errorf("/healthz said %q", body)
	}
	// The server is the one the health check asked, with authentication as configured.
	status := func(key string) (string, error) {
		cmd := exec.Command(filepath.Join(dir, "fila"), "--addr", addr, "--timeout", "3s", "cluster", "status")
		cmd.Env = append(os.Environ(), "FILA_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := status(apiKey); err != nil {
		t.Errorf("fila cluster status with the API key %q: %v\n%s", apiKey, err, out)
	}
	if apiKey != "" {
		if out, err := status(""); err == nil || !strings.Contains(out, "requires an API key") {
			t.Errorf("fila cluster status without an API key, authentication on: %v\n%s", err, out)
		}
	}
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("fila-server did not stop cleanly on SIGTERM: %v", err)
	}
	if out, ok := healthy(); ok {
		t.Errorf("the health check passed with the server stopped: %s", out)
	}
}

// TestSystemdUnit checks the unit's essentials and, where systemd-analyze exists, verifies it
// with ExecStart pointing at a real fila-server.
func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile("fila-server.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{"User=fila", "StateDirectory=fila", "Restart=on-failure", "LimitNOFILE=",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ExecStart=/usr/local/bin/fila-server --data-dir /var/lib/fila"} {
		if !strings.Contains(unit, "\n"+want) {
			t.Errorf("fila-server.service lacks %q", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit was not verified")
	}
	dir := buildLikeTheImage(t)
	unitPath := filepath.Join(t.TempDir(), "fila-server.service")
	unit = strings.ReplaceAll(unit, "/usr/local/bin/fila-server", filepath.Join(dir, "fila-server"))
	if err := os.WriteFile(unitPath, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	// verify exits 0 on unknown keys and misspelt values but reports them: any output fails.
	out, err := exec.Command(analyze, "verify", unitPath).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
