package loopback

import (
	"net"
	"strconv"
	"testing"
)

// The addresses are on loopback, below the range the kernel takes outgoing connections' local
// ports from, and free: something can listen on each.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if host != "127.0.0.1" || port <= 0 || port >= low {
			t.Fatalf("FreeAddr gave %s; want 127.0.0.1 and a port below %d", addr, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr's %s cannot be listened on: %v", addr, err)
		}
		ln.Close()
	}
}
