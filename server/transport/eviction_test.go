package transport

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// dialFrom connects to addr from the loopback address from (all of 127.0.0.0/8 is loopback on
// Linux), so that one test can be many clients.
func dialFrom(t *testing.T, from, addr string) *rawClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot connect from %s (this test needs all of 127.0.0.0/8 on loopback): %v", from, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{T: t, NC: nc, FR: wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)}
}

// Idle handshakes from many addresses, each far below its own limit, must not fill the server's
// limit either: a new connection at the server's limit closes the oldest connection of all that
// is still in its handshake. Before, only the new connection's own address's were closed, so
// the server refused every client until the handshakes timed out.
func TestIdleHandshakesFromManyAddressesDoNotLockOutClients(t *testing.T) {
	const limit = 8
	_, addr := startServer(t, Options{MaxConnections: limit, HandshakeTimeout: time.Hour})
	idle := make([]*rawClient, 2*limit)
	for i := range idle {
		idle[i] = dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i), addr)
		idle[i].SendBytes([]byte{0, 0, 0}) // part of a length prefix
	}
	w := dialRaw(t, addr) // from 127.0.0.1, which has no connection open
	w.Handshake()
	newQueue(t, w, &fibp.CreateQueue{Name: "q"})
	for i, c := range idle[:limit+1] {
		if !c.Closed() {
			t.Fatalf("idle connection %d of %d is still open", i+1, len(idle))
		}
	}
	for range limit - 1 { // the slots that handshakes hold are kept
		dialFrom(t, "127.0.0.100", addr).Handshake()
	}
	if !dialFrom(t, "127.0.0.101", addr).Closed() {
		t.Fatal("a connection past the limit was accepted although every slot finished its handshake")
	}
	enqueue(t, w, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})
}
