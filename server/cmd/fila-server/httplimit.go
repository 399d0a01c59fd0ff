package main

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
)

// The HTTP listener needs no key, so anyone who can reach it can open connections and send
// nothing, or headers a byte at a time. Its connections are bounded (maxHTTPConnections), and at
// the bound a new connection closes the oldest one that is not being answered — one still
// waiting for its request, reading it, or idle between keep-alive requests — rather than wait
// for one of them to time out: a health probe, which sends its request at once and is answered
// in microseconds, is served however many slow clients there are. Only when every connection is
// inside a handler does a new one wait for a slot (the server's handlers answer without waiting
// on their client, and one that does not read its answer is cut off by httpTimeout, except a
// --pprof profile or trace). A connection counts as inside its handler from the handler's start
// until its answer has been written out (http.StateIdle), not only until the handler returns:
// net/http flushes a small answer after the handler returns, and evicting it then would lose it.

// evictingListener bounds the connections served at once, closing the oldest idle one at the
// bound.
type evictingListener struct {
	net.Listener
	max int

	mu     sync.Mutex
	freed  *sync.Cond // signalled when a connection closes or leaves a handler, and on Close
	conns  *list.List // of *trackedConn, oldest first
	closed bool
}

func newEvictingListener(ln net.Listener, max int) *evictingListener {
	l := &evictingListener{Listener: ln, max: max, conns: list.New()}
	l.freed = sync.NewCond(&l.mu)
	return l
}

// Accept accepts a connection, first making room for it: the oldest connection outside a
// handler is closed, or Accept waits until one leaves its handler or closes.
func (l *evictingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.conns.Len() >= l.max {
		if l.closed {
			_ = nc.Close()
			return nil, net.ErrClosed
		}
		if victim := l.oldestIdle(); victim != nil {
			l.forget(victim)
			_ = victim.Conn.Close() // at once (a TCP close does not block): the files stay within max; its server goroutine sees it and ends
			continue
		}
		l.freed.Wait()
	}
	c := &trackedConn{Conn: nc, l: l}
	c.elem = l.conns.PushBack(c)
	return c, nil
}

// Close closes the listener, and ends an Accept waiting for room (http.Server.Close waits for
// Serve to return).
func (l *evictingListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// oldestIdle is the oldest connection outside a handler; nil when every one is in a handler.
// The caller holds mu.
func (l *evictingListener) oldestIdle() *trackedConn {
	for e := l.conns.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*trackedConn); !c.busy {
			return c
		}
	}
	return nil
}

// forget takes c out of the count. The caller holds mu.
func (l *evictingListener) forget(c *trackedConn) {
	if c.elem != nil {
		l.conns.Remove(c.elem)
		c.elem = nil
		l.freed.Signal()
	}
}

// trackedConn is a connection of an evictingListener.
type trackedConn struct {
	net.Conn
	l    *evictingListener
	elem *list.Element // nil once forgotten (closed or evicted); under l.mu
	busy bool          // inside a handler; under l.mu
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func (c *trackedConn) setBusy(busy bool) {
	c.l.mu.Lock()
	c.busy = busy
	if !busy {
		c.l.freed.Signal()
	}
	c.l.mu.Unlock()
}

// connKey is the context key of a request's *trackedConn (http.Server.ConnContext).
type connKey struct{}

func withConn(ctx context.Context, nc net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, nc)
}

// markBusy marks the request's connection as inside a handler when h starts, so that it is not
// evicted until its answer is written out (answered).
func markBusy(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
			c.setBusy(true)
		}
		h.ServeHTTP(w, r)
	})
}

// answered is the http.Server's ConnState hook: a connection whose answer has been written out
// (idle again), or which closed or was taken over, may be evicted again.
func answered(nc net.Conn, st http.ConnState) {
	if c, ok := nc.(*trackedConn); ok && (st == http.StateIdle || st == http.StateClosed || st == http.StateHijacked) {
		c.setBusy(false)
	}
}
