package fila

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/filamq/fila/client/internal/backoff"
	"github.com/filamq/fila/client/internal/connevent"
	"github.com/filamq/fila/generated/fibp"
)

// ConnectionEventKind says what happened to a Client's connection.
type ConnectionEventKind = connevent.Kind

const (
	// Disconnected: the connection dropped; reconnection begins.
	Disconnected = connevent.Disconnected
	// Reconnected: a new connection is up (Addr); consumers resubscribe on it.
	Reconnected = connevent.Reconnected
	// ReconnectFailed: reconnection gave up after MaxReconnects attempts; the client
	// has stopped with Err a *ReconnectError.
	ReconnectFailed = connevent.ReconnectFailed
)

// ConnectionEvent is passed to Options.ConnectionHandler: Kind, the address lost or connected (Addr), why the
// connection dropped or the last dial failure (Err), and the dial attempts of the outage.
type ConnectionEvent = connevent.Event

// ErrDisconnected is matched (errors.Is) by every *ReconnectError: a call found the client
// without a connection and was not sent.
var ErrDisconnected = errors.New("fila: disconnected")

// ReconnectError is the failure of a call that waited for a connection while the client was
// reconnecting and whose context ended first (Cause is then the context's error), and the
// client's Err once reconnection gave up (Cause nil). The request was never sent. It matches
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
	return fmt.Sprintf("fila: disconnected, %s (%d dial attempts; last: %v)", what, e.Attempts, e.Last)
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

// sleepTimer waits d, reporting false when the client stops first.
func (c *Client) sleepTimer(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

func (c *Client) event(e ConnectionEvent) {
	if h := c.opts.ConnectionHandler; h != nil {
		h(e)
	}
}

// isLinkFailure reports an error that means "the connection ended before the answer came".
func isLinkFailure(err error) bool {
	return errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrServerDisconnected)
}

// waitErr is the error of a wait that ended with ctx: a *ReconnectError while the client is
// reconnecting, ctx's error otherwise.
func (c *Client) waitErr(ctxErr error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.cur.Load() == nil {
		return &ReconnectError{Attempts: c.attempts, Last: c.lastErr, Cause: ctxErr}
	}
	return ctxErr
}

// linkLost ends l because of cause. Without reconnection the client stops; with it, l's pending
// requests fail with cause, its subscriptions wait for the next link and reconnection starts.
func (c *Client) linkLost(l *link, cause error) {
	if c.opts.MaxReconnects == 0 {
		c.shutdown(cause, false)
		return
	}
	c.mu.Lock()
	if c.err != nil || c.cur.Load() != l {
		c.mu.Unlock()
		return
	}
	c.cur.Store(nil)
	c.up = make(chan struct{})
	c.lastErr, c.attempts = cause, 0
	pending := l.pending
	l.pending = nil
	for _, s := range c.subs {
		c.orphans = append(c.orphans, s)
	}
	c.subs = map[uint32]*Consumer{}
	c.mu.Unlock()
	close(l.done)
	l.conn.Close()
	for _, cl := range pending {
		cl.ch <- response{err: cause}
	}
	c.log.Warn("fila: connection lost, reconnecting", "addr", l.addr, "err", cause)
	c.event(ConnectionEvent{Kind: Disconnected, Addr: l.addr, Err: cause})
	go c.reconnect(l.addr)
}

// reconnect dials until a link is up (then installs it and resubscribes the consumers), the
// client stops, or MaxReconnects attempts failed (then the client stops with a *ReconnectError).
func (c *Client) reconnect(lostAddr string) {
	l, err := c.redial(lostAddr)
	if l == nil {
		if err != nil {
			c.log.Error("fila: reconnection gave up", "err", err)
			c.shutdown(err, false)
			c.event(ConnectionEvent{Kind: ReconnectFailed, Err: err.(*ReconnectError).Last, Attempts: err.(*ReconnectError).Attempts})
		}
		return
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		l.conn.Close()
		return
	}
	attempts := c.attempts
	c.installLocked(l)
	orphans := c.orphans
	c.orphans = nil
	c.mu.Unlock()
	c.startLink(l)
	c.log.Info("fila: reconnected", "addr", l.addr, "attempts", attempts, "consumers", len(orphans))
	c.event(ConnectionEvent{Kind: Reconnected, Addr: l.addr, Attempts: attempts})
	for _, s := range orphans {
		go c.resubscribe(s)
	}
}

// redial makes attempts until one connects: before each it waits the backoff, then tries every
// seed in turn, starting with lostAddr. It returns nil, nil when the client stopped meanwhile.
func (c *Client) redial(lostAddr string) (*link, error) {
	b := backoff.Backoff{Initial: c.opts.ReconnectWait, Max: c.opts.MaxReconnectWait, Rand: c.rand}
	start := 0
	for i, a := range c.seeds {
		if a == lostAddr {
			start = i
		}
	}
	for n := 0; c.opts.MaxReconnects < 0 || n < c.opts.MaxReconnects; n++ {
		if !c.sleep(b.Delay(n)) {
			return nil, nil
		}
		c.mu.Lock()
		c.attempts = n + 1
		c.mu.Unlock()
		for i := range c.seeds {
			addr := c.seeds[(start+i)%len(c.seeds)]
			l, err := connect(c.life, addr, &c.opts, c.dial)
			if err == nil {
				return l, nil
			}
			if c.life.Err() != nil {
				return nil, nil
			}
			var fe *Error
			if errors.As(err, &fe) { // the server answered, and refused: worth a warning
				c.log.Warn("fila: reconnect refused", "addr", addr, "attempt", n+1, "err", err)
			} else {
				c.log.Debug("fila: reconnect attempt failed", "addr", addr, "attempt", n+1, "err", err)
			}
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return nil, &ReconnectError{Attempts: c.attempts, Last: c.lastErr}
}

// resubscribeTimeout bounds the wait for ConsumeOk when a consumer resubscribes.
const resubscribeTimeout = 30 * time.Second

// resubscribe sends s's Consume again on the live link, with a fresh credit window. If there is
// no live link, s waits for the next one. A link failure before ConsumeOk leaves s registered
// on that link, so that the link's loss hands it to the next reconnection; any other failure
// (QueueNotFound, NotLeader, a timeout) ends s with that error.
func (c *Client) resubscribe(s *Consumer) {
	credit, ok := s.resumeCredit()
	if !ok {
		return // MaxDeliveries already delivered: nothing more to ask for
	}
	req := &fibp.Consume{Queue: s.queue, Credit: credit, Throttles: s.throttles}
	cl := &call{op: req.Opcode(), want: fibp.OpConsumeOk, ch: make(chan response, 1)}
	c.mu.Lock()
	l := c.cur.Load()
	switch {
	case s.Err() != nil: // closed, or failed, meanwhile
		c.mu.Unlock()
		return
	case c.err != nil:
		err := c.err
		c.mu.Unlock()
		s.terminate(err)
		return
	case l == nil:
		c.orphans = append(c.orphans, s)
		c.mu.Unlock()
		return
	}
	cl.id, cl.l = c.allocID(l), l
	l.pending[cl.id] = cl
	s.rebind(cl.id, l.caps.Has(fibp.CapCreditFlowControl))
	c.subs[cl.id] = s
	c.mu.Unlock()
	l.out.appendFrame(cl.id, req, l.maxFrame)

	ctx, cancel := context.WithTimeout(c.life, resubscribeTimeout)
	defer cancel()
	fr, err := c.await(ctx, cl)
	switch {
	case err == nil:
		s.setConsumerID(fr.(*fibp.ConsumeOk).ConsumerID)
		c.log.Debug("fila: consumer resubscribed", "queue", s.queue, "credit", credit)
	case isLinkFailure(err):
	default:
		c.log.Warn("fila: consumer could not resubscribe", "queue", s.queue, "err", err)
		s.fail(err)
	}
}
