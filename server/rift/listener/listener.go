// Package listener serves Rift over QUIC: TLS 1.3 only, ALPN exactly rift-messaging/1, no 0-RTT,
// no plaintext.
//
// A connection authenticates once: its first client-initiated bidirectional stream carries exactly
// one AUTH frame, answered with OK before the server finishes that stream; a failed
// authentication closes the connection. Every later stream is one operation (see stream.go):
// a publisher stream (PUBLISH, PUBLISH_ACK and PING, in order), a subscription (SUBSCRIBE, then
// MESSAGE deliveries), or a single call (REQUEST, STREAM_PUBLISH, CONSUMER_OPEN, CONSUMER_FETCH,
// ACK).
//
// Limits (Options, with the spec's defaults): connections, concurrent operation streams per
// connection (enforced by QUIC's stream credit), a deadline for TLS plus authentication and for
// each stream's first frame, a deadline for a partially received frame and for a blocked write,
// keepalive and idle timeout.
package listener

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/rift/auth"
	"github.com/filamq/fila/server/rift/events"
	"github.com/filamq/fila/server/rift/service"
)

// ALPN is the only application protocol the listener accepts.
const ALPN = riftproto.ALPN

// Application error codes used when the server closes a connection, and stream error codes used
// when it resets a stream (spec/rift.yaml's close_code and reset_code), as quic-go's types.
const (
	CloseNormal        = quic.ApplicationErrorCode(riftproto.CloseNormal)
	CloseAuthFailed    = quic.ApplicationErrorCode(riftproto.CloseAuthFailed)
	CloseProtocol      = quic.ApplicationErrorCode(riftproto.CloseProtocol)
	CloseTooMany       = quic.ApplicationErrorCode(riftproto.CloseTooMany)
	CloseShutdown      = quic.ApplicationErrorCode(riftproto.CloseShutdown)
	ResetCancelled     = quic.StreamErrorCode(riftproto.ResetCancelled)
	ResetSlowConsumer  = quic.StreamErrorCode(riftproto.ResetSlowConsumer)
	ResetWriteDeadline = quic.StreamErrorCode(riftproto.ResetWriteDeadline)
)

// Options configures a Server. Zero fields take the defaults shown (the Rift spec's).
type Options struct {
	Addr           string        // UDP address to listen on; required
	TLS            *tls.Config   // server certificate(s); required. MinVersion and NextProtos are forced.
	MaxConnections int           // 1,024
	MaxStreams     int           // concurrent operation streams per connection, 128
	AuthTimeout    time.Duration // TLS + AUTH, and each stream's first frame: 5 s
	FrameTimeout   time.Duration // rest of a partially received frame: 30 s
	WriteTimeout   time.Duration // a blocked outgoing write: 30 s
	KeepAlive      time.Duration // 10 s
	IdleTimeout    time.Duration // 60 s
	SubQueueMsgs   int           // per-subscription queue bound (bus default)
	SubQueueBytes  int           // per-subscription queue bound in bytes (bus default)
	// Budget and MaxConnectionMemory bound the memory of a connection's subscriber queues, all of
	// its subscriptions together, and of every connection (nil Budget: no accounting).
	Budget              *membudget.Budget
	MaxConnectionMemory int64 // 256 MiB
	Events              *events.Events
	Logger              *slog.Logger
}

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxConnections, 1024)
	def(&o.MaxStreams, 128)
	defD(&o.AuthTimeout, 5*time.Second)
	defD(&o.FrameTimeout, 30*time.Second)
	defD(&o.WriteTimeout, 30*time.Second)
	defD(&o.KeepAlive, 10*time.Second)
	defD(&o.IdleTimeout, 60*time.Second)
	if o.MaxConnectionMemory <= 0 {
		o.MaxConnectionMemory = 256 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Server is a running listener.
type Server struct {
	svc  *service.Service
	opts Options
	ln   *quic.Listener
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[*quic.Conn]*list.Element // the element is in authing until the connection authenticates
	// authing holds the connections that have not authenticated yet, oldest first: at the
	// connection limit the oldest of them gives its slot to a new connection (evictAuthing).
	authing *list.List
}

// Listen starts serving svc on o.Addr.
func Listen(svc *service.Service, o Options) (*Server, error) {
	o.defaults()
	if o.TLS == nil || len(o.TLS.Certificates) == 0 && o.TLS.GetCertificate == nil {
		return nil, errors.New("rift listener: a certificate and key are required")
	}
	tlsConf := o.TLS.Clone()
	tlsConf.MinVersion, tlsConf.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	tlsConf.NextProtos = []string{ALPN}
	qc := &quic.Config{
		HandshakeIdleTimeout:           o.AuthTimeout,
		MaxIdleTimeout:                 o.IdleTimeout,
		KeepAlivePeriod:                o.KeepAlive,
		MaxIncomingStreams:             int64(o.MaxStreams),
		MaxIncomingUniStreams:          -1,
		RequireStreamCreditRelease:     true, // see credits
		InitialStreamReceiveWindow:     256 << 10,
		MaxStreamReceiveWindow:         4 << 20,
		InitialConnectionReceiveWindow: 1 << 20,
		MaxConnectionReceiveWindow:     16 << 20,
		Allow0RTT:                      false,
	}
	if loopback(o.Addr) {
		// Loopback carries any packet size: start at quic-go's largest instead of waiting for
		// path MTU discovery to get there (fewer, fuller packets from the first round trip).
		qc.InitialPacketSize = maxPacketSize
	}
	ln, err := quic.ListenAddr(o.Addr, tlsConf, qc)
	if err != nil {
		return nil, fmt.Errorf("rift listener: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{svc: svc, opts: o, ln: ln, log: o.Logger, ctx: ctx, cancel: cancel, conns: map[*quic.Conn]*list.Element{}, authing: list.New()}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr returns the UDP address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, closes every connection and waits for their handlers.
func (s *Server) Close() error {
	s.cancel()
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.CloseWithError(CloseShutdown, "server shutting down")
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept(s.ctx)
		if err != nil {
			return
		}
		if !s.track(conn) {
			conn.CloseWithError(CloseTooMany, "connection limit reached")
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(conn)
			s.serveConn(conn)
		}()
	}
}

func (s *Server) track(c *quic.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil || len(s.conns) >= s.opts.MaxConnections && !s.evictAuthing() {
		return false
	}
	s.conns[c] = s.authing.PushBack(c)
	return true
}

// evictAuthing closes the oldest connection that has not authenticated yet, so that connections
// that never send AUTH cannot keep clients that do out; false when every connection has
// authenticated. s.mu is held.
func (s *Server) evictAuthing() bool {
	e := s.authing.Front()
	if e == nil {
		return false
	}
	c := s.authing.Remove(e).(*quic.Conn)
	delete(s.conns, c)
	go c.CloseWithError(CloseTooMany, "connection limit reached: a newer connection took the slot of this one, which had not authenticated") // not under s.mu: it waits for the connection's loop
	return true
}

// authenticated takes c off the list of connections that may be evicted.
func (s *Server) authenticated(c *quic.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.conns[c]; e != nil {
		s.authing.Remove(e)
		s.conns[c] = nil
	}
}

func (s *Server) untrack(c *quic.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.conns[c]
	if !ok { // evicted
		return
	}
	if e != nil {
		s.authing.Remove(e)
	}
	delete(s.conns, c)
}

// serveConn authenticates conn and then serves its operation streams until it closes.
func (s *Server) serveConn(conn *quic.Conn) {
	remote := conn.RemoteAddr().String()
	id, err := s.authenticate(conn)
	if err != nil {
		s.log.Debug("rift authentication failed", "remote", remote, "err", err)
		s.opts.Events.AuthFailure(remote, err.Error())
		conn.CloseWithError(CloseAuthFailed, s.authCloseReason(err))
		return
	}
	s.svc.ConnectionOpened()
	s.opts.Events.Opened(remote, id.Name)
	defer func() {
		s.svc.ConnectionClosed()
		s.opts.Events.Closed(remote, id.Name)
	}()
	sess := s.svc.Session(id)
	acct := s.opts.Budget.Open(s.opts.MaxConnectionMemory, func() {
		s.log.Warn("closing the rift connection that holds the most memory: the server's memory budget is full", "remote", remote)
		conn.CloseWithError(CloseNormal, "memory budget full")
	})
	defer acct.Close()
	cr := &credits{}
	defer cr.close() // after the handlers have returned
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		str, err := conn.AcceptStream(s.ctx)
		if err != nil {
			conn.CloseWithError(CloseNormal, "")
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveStream(conn.Context(), sess, acct, cr, str)
		}()
	}
}

// authCloseReason is the reason sent with CloseAuthFailed: one for every refused AUTH frame
// (nothing to learn about tokens from it), but a missed deadline says so, as it is the client's
// (or the machine's) slowness, not its token.
func (s *Server) authCloseReason(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("authentication failed: no AUTH frame within %v", s.opts.AuthTimeout)
	}
	return "authentication failed"
}

// errAuth is the reason given for any failed authentication.
var errAuth = errors.New("authentication failed")

// authenticate reads the single AUTH frame of the first stream and answers OK.
func (s *Server) authenticate(conn *quic.Conn) (*auth.Identity, error) {
	deadline := time.Now().Add(s.opts.AuthTimeout)
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	defer cancel()
	str, err := conn.AcceptStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("no authentication stream: %w", err)
	}
	defer str.ReleaseStreamCredit()
	defer str.CancelRead(ResetCancelled) // frames after AUTH on this stream are discarded
	str.SetDeadline(deadline)
	fr := newFrameReader(str)
	defer fr.Release()
	body, err := fr.Next()
	if err != nil {
		return nil, fmt.Errorf("reading AUTH: %w", err)
	}
	var a riftproto.Auth
	if riftproto.Opcode(body[0]) != riftproto.OpAuth {
		return nil, fmt.Errorf("first frame is %v, not AUTH", riftproto.Opcode(body[0]))
	}
	if err := a.Decode(body[1:]); err != nil {
		return nil, err
	}
	id, ok := s.svc.Auth.Authenticate(a.Token)
	if !ok {
		return nil, errAuth
	}
	// Out of the evictable connections before the client hears OK: a client that has it may open
	// another connection at once, which must not take this one's slot (evictAuthing).
	s.authenticated(conn)
	if _, err := str.Write(riftproto.AppendFrame(nil, &riftproto.Ok{})); err != nil {
		return nil, err
	}
	return id, str.Close()
}

// maxPacketSize is the largest UDP payload quic-go sends (its MaxPacketBufferSize).
const maxPacketSize = 1452

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

// maxFor is the per-opcode body limit checked before a body is read (AUTH: 4,099 bytes).
func maxFor(op byte) int { return riftproto.Opcode(op).MaxBody() }
