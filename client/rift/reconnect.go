package rift

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/client/internal/backoff"
	"github.com/filamq/fila/client/internal/connevent"
)

// WithMaxReconnects turns on reconnection and bounds it: when the QUIC connection drops (server
// restart, kill, network loss, idle timeout) the client dials again, up to n attempts per outage
// (each attempt tries every address in turn, the lost one first), or without limit when n is
// negative. 0, the default, is no reconnection. A successful reconnect resets the count.
//
// While reconnecting, calls wait for the connection within their context (capped by the
// operation timeout) and then fail with a *ReconnectError (errors.Is ErrDisconnected).
// Operations in flight when the connection dropped fail with an error wrapping
// ErrConnectionLost; they may or may not have taken effect and are not retried. Subscriptions
// subscribe again on the new connection by themselves, and Publishers open a new stream. When
// the attempts run out, every call fails with the *ReconnectError.
//
// A server that vanishes without closing the connection (SIGKILL, a network partition) is noticed
// only after the QUIC idle timeout (see WithQUICConfig: 60 s by default).
func WithMaxReconnects(n int) Option { return func(c *Client) { c.maxReconnects = n } }

// WithReconnectWait sets the backoff before the first attempt of an outage (default 100 ms); it
// doubles per attempt up to the maximum (WithMaxReconnectWait), and each wait is drawn uniformly
// from [w/2, w) (jitter).
func WithReconnectWait(d time.Duration) Option { return func(c *Client) { c.reconnectWait = d } }

// WithMaxReconnectWait caps the backoff between attempts (default 5 s, at least the
// ReconnectWait).
func WithMaxReconnectWait(d time.Duration) Option {
	return func(c *Client) { c.maxReconnectWait = d }
}

// WithSeeds adds addresses that reconnection tries after the lost one (all are verified with
// the server name given to Connect).
func WithSeeds(addrs ...string) Option {
	return func(c *Client) { c.seeds = append(c.seeds, addrs...) }
}

// WithConnectionHandler sets a function called on every Disconnected, Reconnected and
// ReconnectFailed event, on the client's own goroutines: it must return quickly.
func WithConnectionHandler(h func(ConnectionEvent)) Option {
	return func(c *Client) { c.handler = h }
}

// WithLogger sets the logger of connection events (lost, reconnected, resubscription failures;
// Debug: each failed attempt). Default: no logging.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

const (
	defaultReconnectWait    = 100 * time.Millisecond
	defaultMaxReconnectWait = 5 * time.Second
)

// ConnectionEventKind says what happened to a Client's connection.
type ConnectionEventKind = connevent.Kind

const (
	// Disconnected: the connection dropped; reconnection begins.
	Disconnected = connevent.Disconnected
	// Reconnected: a new connection is up (Addr); subscriptions subscribe again on it.
	Reconnected = connevent.Reconnected
	// ReconnectFailed: reconnection gave up after MaxReconnects attempts; every call now
	// fails with a *ReconnectError.
	ReconnectFailed = connevent.ReconnectFailed
)

// ConnectionEvent is passed to the connection handler: Kind, the address lost or connected (Addr), why the
// connection dropped or the last dial failure (Err), and the dial attempts of the outage.
type ConnectionEvent = connevent.Event

var (
	// ErrDisconnected is matched (errors.Is) by every *ReconnectError: a call found the client
	// without a connection and was not sent.
	ErrDisconnected = errors.New("rift: disconnected")
	// ErrConnectionLost is wrapped by the error of an operation that failed because its
	// connection ended; the operation may or may not have taken effect.
	ErrConnectionLost = errors.New("rift: connection lost")
)

// ReconnectError is the failure of a call that waited for a connection while the client was
// reconnecting and whose context ended first (Cause is then the context's error), and of every
// call once reconnection gave up (Cause nil). The call was never sent. It matches
// ErrDisconnected, Cause and Last with errors.Is.
type ReconnectError struct {
	Attempts int   // dial attempts in the outage so far
	Last     error // the last dial failure, or why the connection dropped
	Cause    error // the waiting call's context error; nil when reconnection gave up
}

func (e *ReconnectError) Error() string {
	what := "reconnection gave up"
	if e.Cause != nil {
		what = "gave up waiting for a connection: " + e.Cause.Error()
	}
	return fmt.Sprintf("rift: disconnected, %s (%d dial attempts; last: %v)", what, e.Attempts, e.Last)
}

// Is reports target == ErrDisconnected.
func (e *ReconnectError) Is(target error) bool { return target == ErrDisconnected }

// Unwrap returns Cause and Last, those that are set.
func (e *ReconnectError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Cause, e.Last} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// redialer is the reconnect loop, independent of QUIC so that tests can drive it.
type redialer[T any] struct {
	addrs   []string
	max     int // attempts; negative: no limit
	backoff backoff.Backoff
	sleep   func(time.Duration) bool // false: the client stopped
	dial    func(addr string) (T, error)
	failed  func(attempt int, addr string, err error)
}

// run makes attempts until one connects: before each it waits the backoff, then tries every
// address in turn, starting with lost. It returns ok false and a nil error when sleep reported
// the client stopped, and a *ReconnectError when the attempts ran out.
func (r redialer[T]) run(lost string, cause error) (conn T, addr string, attempts int, ok bool, err error) {
	start := 0
	for i, a := range r.addrs {
		if a == lost {
			start = i
		}
	}
	last := cause
	for n := 0; r.max < 0 || n < r.max; n++ {
		if !r.sleep(r.backoff.Delay(n)) {
			return conn, "", n, false, nil
		}
		for i := range r.addrs {
			a := r.addrs[(start+i)%len(r.addrs)]
			c, err := r.dial(a)
			if err == nil {
				return c, a, n + 1, true, nil
			}
			last = err
			if r.failed != nil {
				r.failed(n+1, a, err)
			}
		}
	}
	var zero T
	return zero, "", r.max, false, &ReconnectError{Attempts: r.max, Last: last}
}

// sleepLife waits d, reporting false when the client is closed first.
func (c *Client) sleepLife(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.life.Done():
		return false
	}
}

func (c *Client) event(e ConnectionEvent) {
	if c.handler != nil {
		c.handler(e)
	}
}

// connection returns the live connection, waiting within ctx while the client reconnects.
func (c *Client) connection(ctx context.Context) (*quic.Conn, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, ErrClosed
		case c.err != nil:
			err := c.err
			c.mu.Unlock()
			return nil, err
		case c.cur != nil:
			conn := c.cur
			c.mu.Unlock()
			return conn, nil
		}
		up := c.up
		c.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return nil, c.waitErr(ctx.Err())
		}
	}
}

// waitErr is the error of a wait for a connection that ended with ctx: a *ReconnectError while
// the client is reconnecting, ctx's error otherwise.
func (c *Client) waitErr(ctxErr error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && c.err == nil && c.cur == nil {
		return &ReconnectError{Attempts: c.attempts, Last: c.lastErr, Cause: ctxErr}
	}
	return ctxErr
}

// reconnecting reports whether reconnection is on.
func (c *Client) reconnecting() bool { return c.maxReconnects != 0 }

// dead reports whether conn has ended.
func dead(conn *quic.Conn) bool {
	select {
	case <-conn.Context().Done():
		return true
	default:
		return false
	}
}

// lost reports whether err, from an operation on conn, means that conn has ended: its context
// is done, or err is one of quic-go's connection errors. A stream can learn of the end (an idle
// timeout, a close by the peer) before the connection's context does, so the context alone
// would let a lost connection pass for a failure of the stream.
func lost(conn *quic.Conn, err error) bool {
	if dead(conn) {
		return true
	}
	var (
		idle  *quic.IdleTimeoutError
		hs    *quic.HandshakeTimeoutError
		app   *quic.ApplicationError
		tr    *quic.TransportError
		reset *quic.StatelessResetError
	)
	return errors.As(err, &idle) || errors.As(err, &hs) || errors.As(err, &app) || errors.As(err, &tr) ||
		errors.As(err, &reset)
}

// watch starts reconnection when conn, the current connection, ends.
func (c *Client) watch(conn *quic.Conn) {
	select {
	case <-conn.Context().Done():
		c.lost(conn)
	case <-c.life.Done():
	}
}

// lost replaces conn, if it is still the current connection, by none, and starts reconnection.
func (c *Client) lost(conn *quic.Conn) {
	cause := context.Cause(conn.Context())
	c.mu.Lock()
	if c.closed || c.cur != conn {
		c.mu.Unlock()
		return
	}
	addr := c.curAddr
	c.cur = nil
	c.up = make(chan struct{})
	c.attempts, c.lastErr = 0, cause
	c.mu.Unlock()
	c.log.Warn("rift: connection lost, reconnecting", "addr", addr, "err", cause)
	c.event(ConnectionEvent{Kind: Disconnected, Addr: addr, Err: cause})
	go c.reconnect(addr, cause)
}

// reconnect dials until a connection is up (then installs it and resubscribes the
// subscriptions), the client is closed, or the attempts ran out.
func (c *Client) reconnect(lostAddr string, cause error) {
	r := redialer[*quic.Conn]{
		addrs:   c.addrs,
		max:     c.maxReconnects,
		backoff: backoff.Backoff{Initial: c.reconnectWait, Max: c.maxReconnectWait, Rand: c.rand},
		sleep:   c.sleepLife,
		dial:    func(addr string) (*quic.Conn, error) { return c.dial(c.life, addr) },
		failed: func(n int, addr string, err error) {
			c.mu.Lock()
			c.attempts, c.lastErr = n, err
			c.mu.Unlock()
			var re *refusedError
			if errors.As(err, &re) {
				c.log.Warn("rift: reconnect refused", "addr", addr, "attempt", n, "err", err)
			} else {
				c.log.Debug("rift: reconnect attempt failed", "addr", addr, "attempt", n, "err", err)
			}
		},
	}
	conn, addr, attempts, ok, err := r.run(lostAddr, cause)
	c.mu.Lock()
	if !ok || c.closed {
		if ok {
			conn.CloseWithError(closeNormal, "")
		}
		if err != nil && !c.closed {
			c.err = err
			close(c.up)
			close(c.gaveUp)
		}
		c.mu.Unlock()
		if err != nil {
			re := err.(*ReconnectError)
			c.log.Error("rift: reconnection gave up", "err", err)
			c.event(ConnectionEvent{Kind: ReconnectFailed, Err: re.Last, Attempts: re.Attempts})
		}
		return
	}
	c.cur, c.curAddr = conn, addr
	close(c.up)
	subs := make([]*Subscription, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	go c.watch(conn)
	c.log.Info("rift: reconnected", "addr", addr, "attempts", attempts, "subscriptions", len(subs))
	c.event(ConnectionEvent{Kind: Reconnected, Addr: addr, Attempts: attempts})
	for _, s := range subs {
		go s.resubscribe(conn)
	}
}

// Connected reports whether the client has a live connection (false while reconnecting, after
// reconnection gave up, and after Close).
func (c *Client) Connected() bool {
	c.mu.Lock()
	conn := c.cur
	closed := c.closed
	c.mu.Unlock()
	return !closed && conn != nil && !dead(conn)
}
