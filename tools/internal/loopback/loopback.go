// Package loopback finds loopback addresses for the processes the tools start.
package loopback

import (
	"net"
	"strconv"
)

// FreeAddr returns a loopback address with a port that was free a moment ago. Another process
// may take the port before the caller's does; use it for programs that cannot listen on port 0
// and report their address.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
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
