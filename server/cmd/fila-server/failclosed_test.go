package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

const testBootstrapKey = "bootstrap-key-of-the-fail-closed-test-0123456789"

// serverEnv is the environment without any FILA_* variable of the test's own process, plus env.
func serverEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FILA_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// refusedStart runs bin with args and env and expects it to exit by itself, non-zero, without
// ever serving; it returns the exit code and what the process wrote to stderr. The guard only
// keeps a server that does start from hanging the test.
func refusedStart(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the server started and served instead of refusing to start:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the server exited with %v, want a non-zero exit:\n%s", err, stderr.String())
	}
	return exit.ExitCode(), stderr.String()
}

// startServerEnv is startServer with the process's environment given.
func startServerEnv(t *testing.T, bin string, env []string, logs io.Writer, args ...string) *serverProc {
	t.Helper()
	if logs == nil {
		logs = os.Stderr
	}
	addrFile := filepath.Join(t.TempDir(), "addrs.json")
	cmd := exec.Command(bin, append(slices.Clip(args), "--addr-file", addrFile)...)
	cmd.Env, cmd.Stderr = env, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); p.wait() })
	p.addrs = waitAddrFile(t, addrFile, p)
	return p
}

func isCode(f fibp.Frame, code fibp.ErrorCode) bool {
	e, ok := f.(*fibp.Error)
	return ok && e.ErrorCode == code
}

// handshake connects to addr presenting key ("" for none) and returns the connection once the
// server accepted it.
func handshake(t *testing.T, addr, key string) *fibptest.Client {
	t.Helper()
	c := fibptest.Dial(t, addr)
	if key == "" {
		c.Handshake()
		return c
	}
	if f, ok := c.HandshakeKey(key).(*fibp.HandshakeOk); !ok {
		t.Fatalf("handshake with the bootstrap key answered %#v", f)
	}
	return c
}

// A data directory that holds API keys is never served with authentication off by mistake: a
// start without the bootstrap key, or with a blank one, is refused with one line naming both ways
// to give the key; only --insecure-no-auth serves it without authentication, and says so loudly.
// (Before: such a start served every client anonymously, with one WARN line.)
func TestADataDirectoryWithKeysNeverStartsWithoutTheBootstrapKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "", "--log-level", "info"}

	// A first start with authentication on stores a key.
	p := startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, args...)
	c := handshake(t, p.addrs.FIBP, testBootstrapKey)
	if res, ok := c.Call(1, &fibp.CreateAPIKey{Name: "tenant-a"}).(*fibp.CreateAPIKeyResult); !ok || res.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateApiKey answered %#v", res)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}

	for _, tc := range []struct {
		name string
		env  []string
		code int
		want []string
	}{
		{"no bootstrap key", serverEnv(), 1, []string{"holds 1 API keys", "FILA_BOOTSTRAP_API_KEY", "--bootstrap-api-key-file", "--insecure-no-auth"}},
		{"an empty variable", serverEnv("FILA_BOOTSTRAP_API_KEY="), 2, []string{"FILA_BOOTSTRAP_API_KEY", "set but empty"}},
		{"white space only", serverEnv("FILA_BOOTSTRAP_API_KEY= \t "), 2, []string{"FILA_BOOTSTRAP_API_KEY", "white space"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := refusedStart(t, bin, tc.env, args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
				if strings.Contains(l, "ERROR") || strings.HasPrefix(l, "fila-server:") {
					errLines = append(errLines, l)
				}
			}
			if len(errLines) != 1 {
				t.Fatalf("want one error line, got %d:\n%s", len(errLines), stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(errLines[0], w) {
					t.Errorf("the error line does not name %q:\n%s", w, errLines[0])
				}
			}
		})
	}

	// --insecure-no-auth serves it without authentication, with an error line at the start.
	var logs lockedBuffer
	p = startServerEnv(t, bin, serverEnv(), &logs, append(args, "--insecure-no-auth")...)
	anon := handshake(t, p.addrs.FIBP, "")
	if res, ok := anon.Call(1, &fibp.ListQueues{}).(*fibp.ListQueuesResult); !ok || res.ErrorCode != fibp.CodeOk {
		t.Fatalf("ListQueues without a key under --insecure-no-auth answered %#v", res)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "AUTHENTICATION IS OFF") {
		t.Errorf("--insecure-no-auth was not logged as an error:\n%s", logs.String())
	}

	// With the key, the directory is served with authentication again.
	p = startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, args...)
	anon = fibptest.Dial(t, p.addrs.FIBP)
	anon.Send(0, &fibp.Handshake{ProtocolVersion: 1})
	if _, f := anon.Next(); !isCode(f, fibp.CodeUnauthorized) {
		t.Fatalf("a handshake without a key answered %#v", f)
	}
	handshake(t, p.addrs.FIBP, testBootstrapKey)
}

// --insecure-no-auth and a bootstrap key contradict each other: the start is refused.
func TestInsecureNoAuthWithABootstrapKeyIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	code, stderr := refusedStart(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey),
		"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "", "--insecure-no-auth")
	if code != 2 || !strings.Contains(stderr, "insecure_no_auth") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}

// A bootstrap key that was meant to be given but is empty (a secret that did not reach the
// environment: FILA_BOOTSTRAP_API_KEY=$(cat missing-file)) refuses the start on a new data
// directory too, where no stored key would: before, it started with authentication off.
func TestAnEmptyBootstrapKeyIsRefusedOnANewDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	code, stderr := refusedStart(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="),
		"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "")
	if code != 2 || !strings.Contains(stderr, "FILA_BOOTSTRAP_API_KEY: is set but empty") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}
