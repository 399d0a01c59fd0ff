package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// riftConfig writes a configuration with a Rift listener on riftAddr in development mode.
func riftConfig(t *testing.T, riftAddr, certs string) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "fila.yaml")
	yaml := fmt.Sprintf("rift:\n  listen: %s\n  dev_certs: %s\n", riftAddr, certs)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

// waitAddrFile waits until the server has written path (once ready) or exited.
func waitAddrFile(t *testing.T, path string, p *serverProc) boundAddrs {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a safety net against a hang
	for {
		if b, err := os.ReadFile(path); err == nil {
			var a boundAddrs
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("addr file %q: %v", b, err)
			}
			return a
		}
		select {
		case <-p.done:
			t.Fatalf("fila-server exited before it was ready: %v", p.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("fila-server wrote no addr file")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverProc is a running fila-server binary and the addresses it reported bound.
type serverProc struct {
	cmd   *exec.Cmd
	addrs boundAddrs
	done  chan struct{} // closed once the process has exited
	err   error         // how it exited, once done
}

// startServer runs bin with args and --addr-file, logging to logs (os.Stderr when nil), and
// returns once the server reports every listener bound. Listeners given port 0 bind a port the
// system chooses; a test restarting the server passes the reported addresses back, so that
// clients keep finding it. The process is killed when the test ends if it is still running.
func startServer(t *testing.T, bin string, logs io.Writer, args ...string) *serverProc {
	t.Helper()
	if logs == nil {
		logs = os.Stderr
	}
	addrFile := filepath.Join(t.TempDir(), "addrs.json")
	cmd := exec.Command(bin, append(slices.Clip(args), "--addr-file", addrFile)...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); p.wait() })
	p.addrs = waitAddrFile(t, addrFile, p)
	return p
}

// wait waits for the process to exit and returns how it exited.
func (p *serverProc) wait() error {
	<-p.done
	return p.err
}

// stop sends sig and waits for the process to exit.
func (p *serverProc) stop(sig os.Signal) error {
	p.cmd.Process.Signal(sig)
	return p.wait()
}

// Every listener may take port 0: --addr-file reports the ports the system chose, once all of
// them are bound, so that a test never has to guess a free port (and race another for it).
func TestAddrFileReportsTheBoundAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	certs := t.TempDir()
	a := startServer(t, bin, nil, "--config", riftConfig(t, "127.0.0.1:0", certs), "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "error").addrs
	for _, addr := range []string{a.FIBP, a.Rift, a.HTTP} {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
			t.Fatalf("addr file %+v: %q is not a bound address", a, addr)
		}
	}
	nc, _, err := rawConn(a.FIBP) // FIBP handshake
	if err != nil {
		t.Fatalf("FIBP at %s: %v", a.FIBP, err)
	}
	nc.Close()
	resp, err := http.Get("http://" + a.HTTP + "/healthz")
	if err != nil {
		t.Fatalf("HTTP at %s: %v", a.HTTP, err)
	}
	resp.Body.Close()
	if _, err := tryDialRift(t, a.Rift, certs); err != nil { // ready: no retry needed
		t.Fatalf("Rift at %s: %v", a.Rift, err)
	}
}

// A Rift listener that cannot bind its address stops the server with an error that names it,
// and the server never reports itself ready.
func TestRiftListenerThatCannotBindStopsTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addrFile := filepath.Join(t.TempDir(), "addrs.json")
	cmd := exec.Command(bin, "--config", riftConfig(t, taken.LocalAddr().String(), t.TempDir()), "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--http-listen", "", "--log-level", "warn", "--addr-file", addrFile)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("fila-server with its Rift address taken: %v, want exit status 1\n%s", err, log.String())
	}
	if want := "rift listener: listen udp " + taken.LocalAddr().String(); !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.String())
	}
	if _, err := os.Stat(addrFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("addr file written by a server that did not start: %v", err)
	}
}
