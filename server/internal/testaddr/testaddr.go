// Package testaddr finds loopback addresses for the servers tests start where port 0 cannot
// do (a cluster's initial_cluster names every node's address before any node starts).
package testaddr

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Free returns a loopback address whose port was free a moment ago, taken below the kernel's
// range for outgoing connections' local ports (ip_local_port_range): a port from that range, as
// port 0 gives, can be taken by any connection the machine opens before the server listens on
// it, which a busy test run does ("address already in use"); below it only another program that
// picks ports the same way can take it first.
func Free(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	for range 64 {
		port := low/2 + rand.IntN(low-low/2)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken: another one
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ephemeralLow is the first port of the kernel's range for outgoing connections' local ports
// (Linux's default where it cannot be read).
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 2048 {
		return linuxDefault
	}
	return low
}
