package listener_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/rift/listener"
	"github.com/filamq/fila/server/rift/stream"
)

// Connections that finish the QUIC handshake but never send AUTH cannot keep clients that do
// out: at the connection limit the oldest connection that has not authenticated gives its slot to
// the new one. Authenticated connections keep theirs. (Oldest in the order the server accepted
// them, which need not be the order they were dialed in: a client's Dial returns before the
// server has taken its handshake's last flight, so the test does not say which idle connections
// go first, only how many.)
func TestConnectionsThatNeverAuthenticateDoNotLockOutClients(t *testing.T) {
	const limit = 4
	f := start(t, func(o *listener.Options) { o.MaxConnections = limit; o.AuthTimeout = time.Hour })
	idle := make([]*quic.Conn, 3*limit)
	for i := range idle {
		c, err := rt.Dial(t, f.addr, rt.ClientTLS(t), nil)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i+1, err)
		}
		idle[i] = c
	}
	c := rt.Connect(t, f.addr, "admin-token")
	ping(t, c)
	// 12 idle and one authenticated connection for 4 slots: 9 idle ones gave theirs.
	open := expectSomeClosed(t, idle, 2*limit+1, listener.CloseTooMany)
	for range limit - 1 { // each takes the slot of one that has not authenticated
		rt.Connect(t, f.addr, "admin-token")
	}
	for _, old := range open {
		expectClosed(t, old, listener.CloseTooMany)
	}
	ping(t, c)
	last, err := rt.Dial(t, f.addr, rt.ClientTLS(t), nil)
	if err == nil { // refused right after its handshake: before Dial returns, or after
		expectClosed(t, last, listener.CloseTooMany)
	}
}

// ping sends PING on a new stream of c and expects OK.
func ping(t *testing.T, c *quic.Conn) {
	t.Helper()
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, s)
}

// expectSomeClosed waits until n of conns are closed by the server with code, and returns the
// others (open when it returned).
func expectSomeClosed(t *testing.T, conns []*quic.Conn, n int, code quic.ApplicationErrorCode) []*quic.Conn {
	t.Helper()
	closed := make(chan *quic.Conn, len(conns))
	for _, c := range conns {
		go func() { // ends by the test's cleanup at the latest, which closes every connection
			<-c.Context().Done()
			closed <- c
		}()
	}
	timeout := time.After(closeWait)
	done := map[*quic.Conn]bool{}
	for len(done) < n {
		select {
		case c := <-closed:
			expectClosed(t, c, code)
			done[c] = true
		case <-timeout:
			t.Fatalf("%d of %d connections closed after %v, want %d closed by the server", len(done), len(conns), closeWait, n)
		}
	}
	var open []*quic.Conn
	for _, c := range conns {
		if !done[c] {
			open = append(open, c)
		}
	}
	return open
}

// Durable consumers are never deleted; one identity may have at most MaxConsumersPerOwner on a
// stream (counted again after a restart), so CONSUMER_OPEN with ever new names cannot make the
// store and the server's memory grow for good. Other identities are not affected.
func TestDurableConsumersPerIdentityAreBounded(t *testing.T) {
	f := start(t, nil)
	open := func(name string) *riftproto.ConsumerOpen {
		return &riftproto.ConsumerOpen{Stream: "small", Name: name, Filter: "small.>", AckWaitMs: 1000, MaxAckPending: 1}
	}
	c := rt.Connect(t, f.addr, "reader-token")
	for i := range stream.MaxConsumersPerOwner {
		call(t, c, open(fmt.Sprint("c", i)))
	}
	refused := func(c *quic.Conn) {
		t.Helper()
		s := rt.Open(t, c)
		s.Send(t, open("one-more"))
		rt.ExpectError(t, s, riftproto.CodeOperation)
	}
	refused(c)
	f.restart()
	c = rt.Connect(t, f.addr, "reader-token")
	refused(c)
	call(t, c, open("c7")) // resuming an existing one is fine
	call(t, rt.Connect(t, f.addr, "admin-token"), open("one-more"))
}
