package fila

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Connection-level mistakes that Dial recognises and reports as what they are (errors.Is).
var (
	// ErrTLSRequired: the address serves TLS and the client connected without it (Options.TLS).
	ErrTLSRequired = errors.New("fila: the server expects TLS")
	// ErrTLSNotServed: the client connected with TLS to an address that does not serve it.
	ErrTLSNotServed = errors.New("fila: the server does not speak TLS")
	// ErrHTTPServer: the address is an HTTP server (such as the metrics port), not FIBP.
	ErrHTTPServer = errors.New("fila: this is an HTTP server, not FIBP")
)

// httpPrefix is "HTTP" read as a FIBP frame length: the start of an HTTP server's answer.
const httpPrefix = 'H'<<24 | 'T'<<16 | 'T'<<8 | 'P'

// explainTLS recognises a TLS handshake that failed because the server speaks plain FIBP.
func explainTLS(addr string, err error) error {
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		return fmt.Errorf("%w (%s): %v", ErrTLSNotServed, addr, err)
	}
	return nil
}

// explainHandshake recognises a failed FIBP handshake caused by a wrong port or a missing TLS
// layer; nil when err is none of these. A server that closed the connection without a word is
// probed once with a TLS handshake (no certificate is checked and nothing is sent after it).
func explainHandshake(ctx context.Context, addr string, o *Options, dial dialFunc, err error) error {
	var fse *wire.FrameSizeError
	if errors.As(err, &fse) && fse.Length == httpPrefix {
		return fmt.Errorf("%w (%s)", ErrHTTPServer, addr)
	}
	if o.TLS != nil || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
		return nil
	}
	if ctx.Err() != nil || !speaksTLS(ctx, addr, dial) {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrTLSRequired, addr)
}

// speaksTLS reports whether addr answers a TLS ClientHello as a TLS server does.
func speaksTLS(ctx context.Context, addr string, dial dialFunc) bool {
	nc, err := dial(ctx, addr)
	if err != nil {
		return false
	}
	defer nc.Close()
	tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe: nothing is sent over it
	err = tc.HandshakeContext(ctx)
	var alert tls.AlertError
	return err == nil || errors.As(err, &alert)
}

// nudgeAfter is how long the handshake waits for its answer before nudging (see nudge).
const nudgeAfter = 500 * time.Millisecond

// nudgeID is the request ID of the nudge Ping: its bytes are newlines, and a client's own
// request IDs start at 1 on a new connection, so none is waiting for this one's Pong.
const nudgeID = 0x0a0a0a0a

// nudge sends, once the handshake has waited nudgeAfter, a Ping whose header holds newlines: a
// FIBP server answers it after HandshakeOk (the Pong is ignored), and a line-based server such as
// an HTTP one, which would otherwise wait for the end of its request line, answers at once, so
// that the answer can be recognised. stop cancels the nudge and waits for it.
func nudge(nc net.Conn) (stop func()) {
	cancel, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(nudgeAfter)
		defer t.Stop()
		select {
		case <-t.C:
			_, _ = nc.Write(fibp.AppendFrame(nil, 0, nudgeID, &fibp.Ping{}))
		case <-cancel:
		}
	}()
	return func() { close(cancel); <-done }
}
