package fila

import (
	"context"
	"errors"
	"time"

	"github.com/filamq/fila/client/internal/backoff"
	"github.com/filamq/fila/generated/fibp"
)

// firstDial makes the connection Dial returns. One attempt tries every seed in turn; with
// Options.DialRetry, failed attempts are followed by more, after the reconnection backoff, until
// a seed answers, ctx ends, MaxReconnects attempts (when positive) failed, or a seed refused in
// a way that another attempt would not change (see retryable).
func (c *Client) firstDial(ctx context.Context) (*link, error) {
	b := backoff.Backoff{Initial: c.opts.ReconnectWait, Max: c.opts.MaxReconnectWait, Rand: c.rand}
	var last error // the last failure that was not ctx ending
	for n := 1; ; n++ {
		var final error // a failure that retrying would not change
		for _, addr := range c.seeds {
			l, err := connect(ctx, addr, &c.opts, c.dial)
			if err == nil {
				return l, nil
			}
			c.log.Debug("fila: dial failed", "addr", addr, "attempt", n, "err", err)
			if ctx.Err() == nil || last == nil {
				last = err
			}
			if !retryable(err) {
				final = err
			}
		}
		switch {
		case !c.opts.DialRetry:
			return nil, last
		case final != nil:
			return nil, final
		case ctx.Err() != nil:
			return nil, &ReconnectError{Attempts: n, Last: last, Cause: ctx.Err()}
		case c.opts.MaxReconnects > 0 && n >= c.opts.MaxReconnects:
			return nil, &ReconnectError{Attempts: n, Last: last}
		}
		if err := sleepCtx(ctx, b.Delay(n-1)); err != nil {
			return nil, &ReconnectError{Attempts: n, Last: last, Cause: err}
		}
	}
}

// retryable reports whether a failed dial is worth another attempt: the address did not answer
// (nothing listens yet, a timeout, a reset), or answered NodeNotReady. A broker that refused the
// handshake (Unauthorized, UnsupportedVersion, ...) and the connection mistakes (ErrTLSRequired,
// ErrTLSNotServed, ErrHTTPServer) would fail the same way again.
func retryable(err error) bool {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code == fibp.CodeNodeNotReady
	}
	return !errors.Is(err, ErrTLSRequired) && !errors.Is(err, ErrTLSNotServed) && !errors.Is(err, ErrHTTPServer)
}

// sleepCtx waits d, or returns ctx's error when it ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
