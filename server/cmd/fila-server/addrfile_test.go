package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
func waitAddrFile(t *testing.T, path string, exited <-chan error) boundAddrs {
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
		case err := <-exited:
			t.Fatalf("fila-server exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("fila-server wrote no addr file")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Every listener may take port 0: --addr-file reports the ports the system chose, once all of
// them are bound, so that a test never has to guess a free port (and race another for it).
func TestAddrFileReportsTheBoundAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	certs := t.TempDir()
	addrFile := filepath.Join(t.TempDir(), "addrs.json")
	cmd := exec.Command(bin, "--config", riftConfig(t, "127.0.0.1:0", certs), "--data-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "error", "--addr-file", addrFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { cmd.Process.Kill(); <-exited }()
	a := waitAddrFile(t, addrFile, exited)
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
