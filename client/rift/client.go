// Package rift is the Go client of Rift, the subject broker Fila serves over QUIC (TLS 1.3, ALPN
// rift-messaging/1).
//
//	tlsConf, err := rift.TLSConfig("certs/ca.pem") // explicit trust roots
//	c, err := rift.Connect(ctx, "127.0.0.1:7443", "localhost", tlsConf, token)
//	sub, err := c.Subscribe(ctx, "game.score.*", "")
//	pub, err := c.Publisher(ctx)
//	pub.Publish(ctx, "game.score.player42", "", payload)
//	pub.Flush(ctx)                        // PING barrier: every earlier publication was routed
//	msg, err := sub.Recv(ctx)             // cancellation safe
//
// Every operation has a deadline: the context's, capped by the client's operation timeout (30 s
// by default); Request waits for its own timeout plus five seconds for transport.
//
// Durable streams: StreamPublish stores a record, Consumer fetches and acknowledges them;
// CreateStream, DeleteStream, StreamInfo and Streams administer streams at run time (a control
// identity's requests to rift.control.stream.*).
//
// Delivery is at most once. A Publisher batches: Publish queues the frame for a writer goroutine
// that hands everything queued to QUIC in one write, so a publisher never waits for the network
// unless 512 KiB are already waiting. A Publisher becomes unusable after any failed or cancelled
// operation, because a cancelled write can leave half a frame on its stream: make a new one to
// continue (a failure to send queued frames shows on the next operation).
// Client.Publish uses a shared publisher and opens a new stream on the call after a failure; it
// never retries a failed publication, which may nevertheless have reached the broker (retries
// can duplicate: applications that need idempotency supply their own message identifiers).
//
// With WithMaxReconnects the client survives the loss of its connection (a server restart or
// kill): it dials again with exponential backoff and jitter, trying the Connect address and the
// WithSeeds addresses in turn; subscriptions subscribe again and Publishers open a new stream by
// themselves, and calls made while disconnected wait within their context, then fail with a
// *ReconnectError (errors.Is ErrDisconnected). Delivery stays at most once: messages published
// while a subscription had no connection are not delivered to it. See WithMaxReconnects.
package rift

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/client/internal/backoff"
	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
)

// ALPN is the application protocol Rift servers accept.
const ALPN = riftproto.ALPN

// Defaults.
const (
	DefaultTimeout   = 30 * time.Second // per operation
	RequestAllowance = 5 * time.Second  // added to a REQUEST's own timeout
)

// Error is an ERROR frame from the server.
type Error struct {
	Code    riftproto.ErrorCode // CodePermission or CodeOperation
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("rift: %s: %s", codeName(e.Code), e.Message)
}

func codeName(c riftproto.ErrorCode) string {
	switch c {
	case riftproto.CodePermission:
		return "permission denied"
	case riftproto.CodeOperation:
		return "operation failed"
	}
	return c.String()
}

// IsPermission reports whether err is a permission refusal from the server.
func IsPermission(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == riftproto.CodePermission
}

// Errors of the client itself.
var (
	ErrBroken       = errors.New("rift: publisher unusable after a failed or cancelled operation")
	ErrClosed       = errors.New("rift: closed")
	ErrSlowConsumer = errors.New("rift: subscription ended by the server: slow consumer")
	ErrNoTrustRoots = errors.New("rift: the TLS configuration needs explicit trust roots (RootCAs)")
)

// The QUIC codes of spec/rift.yaml the client sends or recognises: a normal close, a cancelled
// stream, and the reset the server uses for a slow consumer it could not send an ERROR to.
const (
	closeNormal       = quic.ApplicationErrorCode(riftproto.CloseNormal)
	resetCancelled    = quic.StreamErrorCode(riftproto.ResetCancelled)
	resetSlowConsumer = quic.StreamErrorCode(riftproto.ResetSlowConsumer)
)

// TLSConfig returns a client TLS configuration trusting only the CA certificates in caFile (PEM).
func TLSConfig(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("rift: no certificates in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// Option tunes a Client.
type Option func(*Client)

// WithTimeout sets the operation timeout (default 30 s).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithQUICConfig replaces the QUIC settings (default: 10 s keepalive, 60 s idle timeout, and on
// loopback the largest initial packet size).
func WithQUICConfig(q *quic.Config) Option { return func(c *Client) { c.quicConf = q } }

// Client is one authenticated connection, or with WithMaxReconnects one at a time. It is safe
// for concurrent use.
type Client struct {
	timeout  time.Duration
	quicConf *quic.Config
	tlsConf  *tls.Config // with ServerName and ALPN
	token    string

	maxReconnects                   int
	reconnectWait, maxReconnectWait time.Duration
	seeds                           []string
	addrs                           []string // the Connect address, then the seeds
	handler                         func(ConnectionEvent)
	log                             *slog.Logger
	dial                            func(ctx context.Context, addr string) (*quic.Conn, error) // dials and authenticates
	rand                            func() float64
	life                            context.Context // ends with Close
	stop                            context.CancelFunc

	mu       sync.Mutex
	cur      *quic.Conn    // the live connection; nil while reconnecting
	curAddr  string        // cur's address
	up       chan struct{} // closed when cur is set, reconnection gave up, or the client closed
	err      error         // *ReconnectError once reconnection gave up
	gaveUp   chan struct{} // closed when err is set
	closed   bool
	attempts int   // dial attempts in the current outage
	lastErr  error // the last dial failure, or why the connection dropped
	subs     map[*Subscription]struct{}

	pubMu  sync.Mutex // guards shared
	shared *Publisher
}

// Connect dials addr, verifies the server certificate for serverName against tlsConf's RootCAs,
// and authenticates with token. The connection is ready when Connect returns.
func Connect(ctx context.Context, addr, serverName string, tlsConf *tls.Config, token string, opts ...Option) (*Client, error) {
	if tlsConf == nil || tlsConf.RootCAs == nil || tlsConf.InsecureSkipVerify {
		return nil, ErrNoTrustRoots
	}
	c := &Client{timeout: DefaultTimeout, reconnectWait: defaultReconnectWait, maxReconnectWait: defaultMaxReconnectWait,
		rand: backoff.RandFloat, subs: map[*Subscription]struct{}{}, gaveUp: make(chan struct{})}
	for _, o := range opts {
		o(c)
	}
	if c.reconnectWait <= 0 {
		c.reconnectWait = defaultReconnectWait
	}
	if c.maxReconnectWait <= 0 {
		c.maxReconnectWait = defaultMaxReconnectWait
	}
	c.maxReconnectWait = max(c.maxReconnectWait, c.reconnectWait)
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.addrs = append([]string{addr}, c.seeds...)
	if c.quicConf == nil {
		c.quicConf = &quic.Config{KeepAlivePeriod: 10 * time.Second, MaxIdleTimeout: 60 * time.Second}
		if loopback(addr) {
			// Loopback carries any packet size: start at quic-go's largest (1,452 bytes) instead
			// of waiting for path MTU discovery to get there.
			c.quicConf.InitialPacketSize = 1452
		}
	}
	c.tlsConf = tlsConf.Clone()
	c.tlsConf.ServerName, c.tlsConf.NextProtos, c.tlsConf.MinVersion = serverName, []string{ALPN}, tls.VersionTLS13
	c.token = token
	if c.dial == nil {
		c.dial = c.dialQUIC
	}
	conn, err := c.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	c.cur, c.curAddr = conn, addr
	c.life, c.stop = context.WithCancel(context.Background())
	if c.reconnecting() {
		go c.watch(conn)
	}
	return c, nil
}

// dialQUIC dials addr and authenticates, within ctx and the operation timeout.
func (c *Client) dialQUIC(ctx context.Context, addr string) (*quic.Conn, error) {
	ctx, cancel := c.opContext(ctx, 0)
	defer cancel()
	conn, err := quic.DialAddr(ctx, addr, c.tlsConf, c.quicConf)
	if err != nil {
		return nil, fmt.Errorf("rift: connect %s: %w", addr, err)
	}
	if err := auth(ctx, conn, c.token); err != nil {
		conn.CloseWithError(closeNormal, "")
		return nil, err
	}
	return conn, nil
}

// loopback reports whether addr (host:port) is a loopback IP address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// auth sends the single AUTH frame on the first stream and waits for OK and the stream's end.
func auth(ctx context.Context, conn *quic.Conn, token string) error {
	a := &riftproto.Auth{Token: token}
	if err := a.Check(); err != nil {
		return fmt.Errorf("rift: token: %w", err)
	}
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return connCause(conn, err)
	}
	s := &call{conn: conn, str: str, fr: newCallReader(str)}
	s.bind(ctx)
	defer s.release()
	if err := s.write(riftproto.AppendFrame(nil, a)); err != nil {
		return connCause(conn, err)
	}
	s.finish()
	if _, err := s.expectOk(); err != nil {
		err = connCause(conn, err)
		var ae *quic.ApplicationError
		if errors.As(err, &ae) && ae.Remote {
			return &refusedError{why: ae.ErrorMessage, code: uint64(ae.ErrorCode), cause: err}
		}
		return fmt.Errorf("rift: authentication failed: %w", err)
	}
	return nil
}

// refusedError is the server closing the connection in answer to AUTH.
type refusedError struct {
	why   string
	code  uint64
	cause error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("rift: the server refused the connection: %s (code %#x)", e.why, e.code)
}

func (e *refusedError) Unwrap() error { return e.cause }

// connCause prefers the connection's close reason (such as a refused authentication) to a
// stream error caused by it.
func connCause(conn *quic.Conn, err error) error {
	select {
	case <-conn.Context().Done():
		if cause := context.Cause(conn.Context()); cause != nil {
			return cause
		}
	default:
	}
	return err
}

// connErr is connCause for an operation on conn after authentication: when conn has ended, the
// error wraps ErrConnectionLost.
func connErr(conn *quic.Conn, err error) error {
	select {
	case <-conn.Context().Done():
		cause := context.Cause(conn.Context())
		if cause == nil {
			cause = err
		}
		return fmt.Errorf("%w: %w", ErrConnectionLost, cause)
	default:
	}
	return err
}

// Close closes the connection and everything on it, and stops reconnection.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	conn := c.cur
	if conn == nil && c.err == nil {
		close(c.up) // waiters see closed
	}
	c.mu.Unlock()
	c.stop()
	if conn == nil {
		return nil
	}
	return conn.CloseWithError(closeNormal, "")
}

// opContext bounds ctx by d, or by the operation timeout when d is 0.
func (c *Client) opContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d == 0 {
		d = c.timeout
	}
	return context.WithTimeout(ctx, d)
}

// call is one operation stream bound to a context: cancelling the context (or passing its
// deadline) interrupts any blocked read or write.
type call struct {
	conn     *quic.Conn
	str      *quic.Stream
	fr       *wire.FrameReader
	stop     func() bool
	finished bool // the sending half was finished cleanly (FIN)
}

// openStream opens a stream for a single call; release returns its pooled read buffer.
func (c *Client) openStream(ctx context.Context) (*call, error) { return c.open(ctx, 0) }

// openLongStream opens a stream that lives beyond one call (a subscription or a publisher),
// with a read buffer of its own.
func (c *Client) openLongStream(ctx context.Context, bufSize int) (*call, error) {
	return c.open(ctx, bufSize)
}

// open opens a stream on the live connection (bufSize 0: a pooled read buffer). While the
// client reconnects it waits within ctx; a connection found dead is replaced first, since
// nothing was sent on it.
func (c *Client) open(ctx context.Context, bufSize int) (*call, error) {
	for {
		conn, err := c.connection(ctx)
		if err != nil {
			return nil, err
		}
		s, err := openOn(ctx, conn, bufSize)
		if err != nil && c.reconnecting() && ctx.Err() == nil && lost(conn, err) {
			c.lost(conn)
			continue
		}
		return s, err
	}
}

// openOn opens a stream on conn.
func openOn(ctx context.Context, conn *quic.Conn, bufSize int) (*call, error) {
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, connErr(conn, err)
	}
	s := &call{conn: conn, str: str}
	if bufSize == 0 {
		s.fr = newCallReader(str)
	} else {
		s.fr = newReaderSize(str, bufSize)
	}
	s.bind(ctx)
	return s, nil
}

// finish closes the sending half of the stream (FIN).
func (s *call) finish() {
	if s.str.Close() == nil {
		s.finished = true
	}
}

// bind makes ctx's deadline and cancellation apply to the stream's reads and writes.
func (s *call) bind(ctx context.Context) {
	if s.stop != nil {
		s.stop()
	}
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Time{}
	}
	s.str.SetDeadline(d)
	s.stop = context.AfterFunc(ctx, func() { s.str.SetDeadline(time.Now()) })
}

// release ends a call: it resets each direction of the stream that did not finish cleanly (a
// clean end needs no RESET_STREAM or STOP_SENDING, which would only cost packets) and returns a
// pooled read buffer. Only the goroutine reading the stream may call it.
func (s *call) release() {
	s.unbind()
	if !s.fr.EOF() {
		s.str.CancelRead(resetCancelled)
	}
	if !s.finished {
		s.str.CancelWrite(resetCancelled)
	}
	s.fr.Release()
}

// cancel resets both directions of the stream; unlike release it is safe while another
// goroutine reads, and it keeps the read buffer.
func (s *call) cancel() {
	s.str.CancelRead(resetCancelled)
	s.str.CancelWrite(resetCancelled)
}

// unbind detaches the context bound by bind.
func (s *call) unbind() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

func (s *call) write(b []byte) error {
	_, err := s.str.Write(b)
	return err
}

// next reads the next frame; ERROR frames become *Error.
func (s *call) next() (riftproto.Opcode, []byte, error) {
	body, err := s.fr.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	op := riftproto.Opcode(body[0])
	if op == riftproto.OpError {
		var e riftproto.Error
		if err := e.Decode(body[1:]); err != nil {
			return 0, nil, err
		}
		return op, nil, &Error{Code: e.Code, Message: e.Message}
	}
	return op, body[1:], nil
}

// expectOk reads one frame that must be OK.
func (s *call) expectOk() (riftproto.Opcode, error) {
	op, _, err := s.next()
	if err == nil && op != riftproto.OpOk {
		err = fmt.Errorf("rift: unexpected %v, want OK", op)
	}
	return op, err
}

// do runs a single-call operation within d (0: the operation timeout): it writes req, finishes
// the sending half, and hands each answer frame to handle until handle reports done.
func (c *Client) do(ctx context.Context, d time.Duration, req riftproto.Frame, handle func(op riftproto.Opcode, body []byte) (bool, error)) error {
	if err := req.Check(); err != nil {
		return fmt.Errorf("rift: %v: %w", req.Opcode(), err)
	}
	ctx, cancel := c.opContext(ctx, d)
	defer cancel()
	s, err := c.openStream(ctx)
	if err != nil {
		return err
	}
	defer s.release()
	if err := s.write(riftproto.AppendFrame(nil, req)); err != nil {
		return s.ctxErr(ctx, err)
	}
	s.finish()
	for {
		op, body, err := s.next()
		if err != nil {
			return s.ctxErr(ctx, err)
		}
		if done, err := handle(op, body); done || err != nil {
			return err
		}
	}
}

// ctxErr reports the context's error when it caused err, and the connection's end when it did.
func (s *call) ctxErr(ctx context.Context, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("rift: %w (%v)", ctx.Err(), err)
	}
	return connErr(s.conn, err)
}
