package main

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// A client that can open sockets can make the server run out of file descriptors. The server
// must live through it: the FIBP listener waits and accepts again once descriptors are free
// (before, accept's EMFILE stopped the listener and with it the whole server), and HTTP
// connections, which need no key, can never take more than a few of them.

// limitFiles lowers the running server's RLIMIT_NOFILE to what it holds now plus headroom, and
// returns what it held.
func limitFiles(t *testing.T, p *serverProc, headroom int) int {
	t.Helper()
	held := openFiles(t, p)
	lim := unix.Rlimit{Cur: uint64(held + headroom), Max: uint64(held + headroom)}
	if err := unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Skipf("cannot lower the server's file limit: %v", err)
	}
	return held
}

func openFiles(t *testing.T, p *serverProc) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// dialMany opens n TCP connections to addr (and closes them at the end of the test).
func dialMany(t *testing.T, addr string, n int, first []byte) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, nc := range conns {
			nc.Close()
		}
	})
	for range n {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", len(conns)+1, n, err)
		}
		conns = append(conns, nc)
		if first != nil {
			if _, err := nc.Write(first); err != nil {
				t.Fatalf("connection %d of %d: %v", len(conns), n, err)
			}
		}
	}
	return conns
}

// assertServes checks that the server is still running and completes a FIBP handshake.
func assertServes(t *testing.T, p *serverProc, what string) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("%s: the server exited (%v)", what, p.err)
	default:
	}
	nc, err := net.Dial("tcp", p.addrs.FIBP)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second)) // a server that never accepts fails the test, not hangs it
	fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: fibp.Version})); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	body, err := fr.Next()
	if err != nil {
		t.Fatalf("%s: no answer to a Handshake: %v", what, err)
	}
	if h, _, _ := fibp.ParseHeader(body); h.Opcode != fibp.OpHandshakeOk {
		t.Fatalf("%s: Handshake answered %v", what, h.Opcode)
	}
}

func TestFIBPListenerOutlivesRunningOutOfFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	p := startServer(t, buildServer(t), nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "", "--log-level", "error")
	limitFiles(t, p, 32)
	conns := dialMany(t, p.addrs.FIBP, 64, nil) // half of them can never be accepted meanwhile
	for _, nc := range conns {
		nc.Close()
	}
	assertServes(t, p, "after 64 connections against a limit of 32 more files")
}

func TestHTTPConnectionsCannotTakeTheServersFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	p := startServer(t, buildServer(t), nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "error")
	const attackers = 3 * maxHTTPConnections
	held := limitFiles(t, p, attackers)
	// Keep-alive requests that are answered, then connections that stay open and idle.
	dialMany(t, p.addrs.HTTP, attackers, []byte("GET /healthz HTTP/1.1\r\nHost: fila\r\n\r\n"))
	assertServes(t, p, fmt.Sprintf("with %d idle HTTP connections", attackers))
	if n := openFiles(t, p); n > held+maxHTTPConnections+8 {
		t.Fatalf("%d idle HTTP connections hold %d of the server's files (it held %d before; HTTP may take %d)",
			attackers, n-held, held, maxHTTPConnections)
	}
}
