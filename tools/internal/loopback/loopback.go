// Package loopback finds loopback addresses for the processes the tools start.
package loopback

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreeAddr returns a loopback address with a port that was free a moment ago, for programs that
// cannot listen on port 0 and report their address. The port is taken below the kernel's range
// for the local ports of outgoing connections (ip_local_port_range): a port from that range, as
// port 0 gives, can be taken by any connection the machine opens before the caller's program
// listens on it (a benchmark's cluster failed to start on "address already in use" so), while
// below it only another program that picks ports the same way could take it first.
func FreeAddr() (string, error) {
	low := ephemeralLow()
	for range 64 {
		port := low/2 + rand.IntN(low-low/2)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken: another one
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
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

// FreePort is FreeAddr's port alone, for configuration files that want a number.
func FreePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}
