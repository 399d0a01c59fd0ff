// Package examples_test builds every example and runs the commands of README.md against a real
// fila-server with a Rift listener in development mode, checking what each prints.
package examples_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// boundAddrs waits for the --addr-file fila-server writes once every listener is bound (renamed
// into place whole), failing the test if the server exits first.
func boundAddrs(t *testing.T, path string, exited <-chan error) (fibp, rift string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			var a struct{ FIBP, Rift string }
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("fila-server wrote %q to its --addr-file: %v", b, err)
			}
			return a.FIBP, a.Rift
		}
		select {
		case err := <-exited:
			t.Fatalf("fila-server exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("fila-server did not report its addresses within 30 s")
		}
	}
}

// readmeCommands returns the commands of README.md's table (` + "`go run ./NAME ARGS…`" + `), each as the
// program's name and its arguments.
func readmeCommands(t *testing.T) [][]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, m := range regexp.MustCompile("(?m)^\\| \\[[^]]+\\]\\([^)]+\\) \\| `go run \\./([^`]+)`").FindAllStringSubmatch(string(readme), -1) {
		out = append(out, strings.Fields(m[1]))
	}
	return out
}

// flagValue returns the value of -name in args, or def.
func flagValue(args []string, name, def string) string {
	if i := slices.Index(args, "-"+name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return def
}

// expectations check what each example prints, given its arguments.
var expectations = map[string]func(t *testing.T, args []string, out string){
	"producer": func(t *testing.T, args []string, out string) {
		if n, _ := strconv.Atoi(flagValue(args, "n", "10")); strings.Count(out, "enqueued message ") != n {
			t.Errorf("want %d enqueued", n)
		}
	},
	"consumer": func(t *testing.T, args []string, out string) {
		if n, _ := strconv.Atoi(flagValue(args, "n", "10")); strings.Count(out, "processed ") != n || !strings.Contains(out, ": message 4 (attempt 1)") {
			t.Errorf("want %d processed, message 4 among them", n)
		}
	},
	"cluster": func(t *testing.T, args []string, out string) {
		if want := "all " + flagValue(args, "n", "100") + " messages delivered ("; !strings.Contains(out, want) {
			t.Errorf("want %q", want)
		}
	},
	"fair-pipeline": func(t *testing.T, _ []string, out string) {
		// DRR with quantum 1 and weights noisy 1, quiet-a 1, quiet-b 2: each round serves noisy once,
		// quiet-a once and quiet-b twice, so the twelve quiet jobs are done within 18 deliveries,
		// not after the hundreds of noisy ones enqueued before them.
		const order = "noisy quiet-a quiet-b quiet-b noisy quiet-a quiet-b quiet-b noisy quiet-a quiet-b quiet-b noisy quiet-a noisy quiet-a noisy quiet-a"
		if !strings.Contains(out, "first 18 deliveries: "+order+"\n") || !strings.Contains(out, "all 12 quiet jobs were done after 18 deliveries (of ") {
			t.Error("want the DRR order and the quiet jobs done after 18 deliveries")
		}
	},
	"rift-pubsub": func(t *testing.T, args []string, out string) {
		n, _ := strconv.Atoi(flagValue(args, "n", "3"))
		for i := range n {
			if !strings.Contains(out, fmt.Sprintf("received greetings.lang%d: hello %d\n", i, i)) {
				t.Errorf("message %d not received", i)
			}
		}
	},
	"rift-request": func(t *testing.T, args []string, out string) {
		if want := "reply: hello, " + flagValue(args, "name", "world") + "\n"; out != want {
			t.Errorf("want %q", want)
		}
	},
	"rift-stream": func(t *testing.T, args []string, out string) {
		n, _ := strconv.Atoi(flagValue(args, "n", "3"))
		want := "created stream demo for demo.orders.>\n"
		for i := range n {
			want += fmt.Sprintf("stored #%d\n", i+1)
		}
		for i := range n {
			want += fmt.Sprintf("fetched #%d demo.orders.%d: order %d\n", i+1, i, i)
		}
		if out != want {
			t.Errorf("want:\n%s", want)
		}
	},
}

// TestExamplesRunAgainstAServer runs every command of README.md's table as written against a real
// server started as the README starts it: its development certificates in data/rift-certs, the
// programs run from examples/ beside data/ (in a scratch directory laid out like the repository),
// so that they find the CA and token by themselves. Only the addresses (random ports) come from
// FILA_ADDR and FILA_RIFT_ADDR. The programs are built once.
func TestExamplesRunAgainstAServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server and the examples")
	}
	cmds := readmeCommands(t)
	mains, _ := filepath.Glob("*/main.go")
	if len(cmds) != len(mains) || len(cmds) != len(expectations) {
		t.Fatalf("README.md's table runs %v; the programs are %v; the test knows %d", cmds, mains, len(expectations))
	}
	bin := t.TempDir()
	// Built as the image builds it (CGO_ENABLED=0 -trimpath, deploy/Dockerfile), the configuration
	// make test compiles in, so that the build reuses its cache.
	build := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "./...", "../server/cmd/fila-server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := t.TempDir()
	certs, workDir, addrFile := filepath.Join(root, "data", "rift-certs"), filepath.Join(root, "examples"), filepath.Join(root, "addrs.json")
	if err := os.Mkdir(workDir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(filepath.Join(bin, "fila-server"), "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "",
		"--log-level", "warn", "--rift-listen", "127.0.0.1:0", "--rift-dev-certs", certs, "--addr-file", addrFile)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() { srv.Process.Kill(); <-exited })
	addr, riftAddr := boundAddrs(t, addrFile, exited)
	token, err := os.ReadFile(filepath.Join(certs, "dev-token"))
	if err != nil {
		t.Fatal(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "FILA_") })
	env = append(env, "FILA_ADDR="+addr, "FILA_RIFT_ADDR="+riftAddr)

	for _, c := range cmds {
		name, args := strings.TrimPrefix(c[0], "./"), c[1:]
		check, ok := expectations[name]
		if !ok {
			t.Errorf("README.md runs %s, which the test has no expectation for", name)
			continue
		}
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Env, cmd.Dir = env, workDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go run %s: %v\n%s", strings.Join(c, " "), err, out)
			continue
		}
		check(t, args, string(out))
		if t.Failed() {
			t.Fatalf("go run %s printed:\n%s", strings.Join(c, " "), out)
		}
	}

	// rift-stream again, from elsewhere with the CA and token in FILA_RIFT_CA and FILA_RIFT_TOKEN: the
	// stream is there, and its consumer resumes after what it acknowledged.
	cmd := exec.Command(filepath.Join(bin, "rift-stream"), "-n", "1")
	cmd.Env, cmd.Dir = append(env, "FILA_RIFT_CA="+filepath.Join(certs, "ca.pem"), "FILA_RIFT_TOKEN="+string(token)), t.TempDir()
	out, err := cmd.CombinedOutput()
	if want := "stream demo exists with 3 messages\nstored #4\nfetched #4 demo.orders.0: order 0\n"; err != nil || string(out) != want {
		t.Errorf("rift-stream a second time: %v, printed:\n%s\nwant:\n%s", err, out, want)
	}
}
