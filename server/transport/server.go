// Package transport serves FIBP over TCP (optionally TLS): framing, the handshake, multiplexed
// requests, keepalive, continuation reassembly, flow control of writes and the unknown-opcode
// rules. It decodes frames with the generated codecs and hands them, through the session, to the
// queue service (server/service).
package transport

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/service"
)

// Options configures a Server. Zero fields take the defaults shown.
type Options struct {
	TLS              *tls.Config // nil: plain TCP
	MaxFrameSize     int         // largest accepted frame, advertised in HandshakeOk (16 MiB)
	MaxReassembly    int         // largest body reassembled from continuation frames (64 MiB)
	MaxPartials      int         // request IDs mid-continuation per connection (64)
	MaxConnections   int         // concurrent connections (10,000)
	MaxPerClient     int         // concurrent connections from one client IP address (1,000)
	MaxInflight      int         // requests awaiting an answer per connection (4,096)
	MaxSubscriptions int         // subscriptions per connection (1,024)
	WriteQueueBytes  int         // pending outbound bytes before a connection is cut (64 MiB)
	// Memory a client can make the server hold — its frame buffers, partial bodies, requests
	// decoded but not answered, queued answers and deliveries — is counted against
	// MaxConnectionMemory per connection and Budget for every connection together.
	MaxConnectionMemory int64             // per connection (256 MiB)
	Budget              *membudget.Budget // server-wide (half the memory available to the process)
	NoMemoryAccounting  bool              // count nothing: only to measure what accounting costs
	ReassemblyTimeout   time.Duration     // a partial body with no new chunk for this long is dropped (30 s)
	HandshakeTimeout    time.Duration     // time to receive the Handshake (10 s)
	PingInterval        time.Duration     // idle time before the server pings (15 s)
	PongTimeout         time.Duration     // time to answer a server Ping (30 s)
	WriteTimeout        time.Duration     // time one socket write may block (30 s)
	NodeID              uint64            // 0 in single-node mode
	Advertise           string            // the address clients are given for this node (empty: the listener's)
	Admin               AdminForwarder    // a cluster node's admin requests about queues other nodes lead (forwardadmin.go); nil: none
	Clock               func() time.Time  // time.Now: API key expiry
	Logger              *slog.Logger
	Registry            prometheus.Registerer
}

func (o *Options) defaults() {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&o.MaxFrameSize, fibp.MaxFrameSize)
	set(&o.MaxReassembly, 64<<20)
	set(&o.MaxPartials, 64)
	set(&o.MaxConnections, 10_000)
	set(&o.MaxPerClient, 1000)
	set(&o.MaxInflight, 4096)
	set(&o.MaxSubscriptions, 1024)
	set(&o.WriteQueueBytes, 64<<20)
	setD(&o.HandshakeTimeout, 10*time.Second)
	setD(&o.PingInterval, 15*time.Second)
	setD(&o.PongTimeout, 30*time.Second)
	setD(&o.WriteTimeout, 30*time.Second)
	setD(&o.ReassemblyTimeout, 30*time.Second)
	if o.MaxConnectionMemory <= 0 {
		o.MaxConnectionMemory = 256 << 20
	}
	if o.Budget == nil && !o.NoMemoryAccounting {
		o.Budget = membudget.New(membudget.DefaultLimit())
	}
	if o.NoMemoryAccounting {
		o.Budget = nil
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

// Server accepts FIBP connections for a queue service.
type Server struct {
	svc  service.Service
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
	perHost  map[string]int        // open connections by client IP address
	greeting map[string]*list.List // by client IP address: its connections still in their handshake, oldest first
	greeters *list.List            // every connection still in its handshake, oldest first
	closing  bool
	wg       sync.WaitGroup
	nextConn atomic.Uint64
	// forced is closed when a Shutdown runs out of time: connections stop waiting for answers.
	forced    chan struct{}
	forceOnce sync.Once

	connGauge prometheus.Gauge
	errors    *prometheus.CounterVec
	denied    deniedLogs
}

// New returns a server for svc.
func New(svc service.Service, opts Options) *Server {
	opts.defaults()
	s := &Server{svc: svc, opts: opts, log: opts.Logger, conns: map[*conn]struct{}{}, perHost: map[string]int{}, greeting: map[string]*list.List{},
		greeters: list.New(), forced: make(chan struct{}), denied: newDeniedLogs(opts.Clock)}
	s.connGauge = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "fila", Name: "connections", Help: "Open FIBP connections."})
	s.errors = newErrorCounter()
	if opts.Registry != nil {
		opts.Registry.MustRegister(s.connGauge, s.errors)
		if budget := opts.Budget; budget != nil {
			opts.Registry.MustRegister(
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fila", Name: "client_memory_bytes",
					Help: "Memory clients make the server hold (FIBP and Rift), counted against the memory budget."},
					func() float64 { return float64(budget.Used()) }),
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fila", Name: "client_memory_budget_bytes",
					Help: "The server-wide memory budget for what clients make the server hold."},
					func() float64 { return float64(budget.Limit()) }))
		}
	}
	return s
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("transport: server closed")

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.ln = ln
	s.mu.Unlock()
	if c, ok := s.svc.(service.Cluster); ok { // a node of a cluster records where clients reach it
		c.SetAdvertise(s.advertised())
	}
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			if retryAccept(err) {
				if backoff == 0 {
					s.log.Warn("accept failed; retrying", "err", err)
				}
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.accept(nc)
	}
}

var errTemporary = errors.New("temporary")

// retryAccept reports whether an Accept error passes: a timeout, or a shortage that ends when
// connections close (out of file descriptors or buffers, a connection reset before it was
// accepted). A client that opens many connections must not stop the listener.
func retryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTemporary) {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

func (s *Server) accept(nc net.Conn) {
	host := clientHost(nc.RemoteAddr())
	s.mu.Lock()
	if s.closing || !s.makeRoom(host) {
		open, fromHost := len(s.conns), s.perHost[host]
		s.mu.Unlock()
		s.log.Warn("refusing a connection", "remote", nc.RemoteAddr(), "open", open, "open_from_client", fromHost)
		nc.Close()
		return
	}
	c := newConn(s, nc, s.nextConn.Add(1))
	if c == nil {
		s.mu.Unlock()
		s.log.Warn("refusing a connection: the server's memory budget is full", "remote", nc.RemoteAddr(), "budget", s.opts.Budget.Limit())
		nc.Close()
		return
	}
	c.host = host
	s.conns[c] = struct{}{}
	s.perHost[host]++
	if s.greeting[host] == nil {
		s.greeting[host] = list.New()
	}
	c.greeting = s.greeting[host].PushBack(c)
	c.greeter = s.greeters.PushBack(c)
	s.wg.Add(1)
	s.mu.Unlock()
	s.connGauge.Inc()
	go func() {
		defer s.wg.Done()
		opened := time.Now()
		c.log.Info("connection opened")
		c.serve()
		s.mu.Lock()
		s.greeted(c)
		if _, open := s.conns[c]; open { // not evicted
			s.forget(c)
		}
		s.mu.Unlock()
		s.connGauge.Dec()
		c.log.Info("connection closed", "open_for", time.Since(opened))
	}()
}

// A connection at a limit makes room by closing the oldest connection that has not finished its
// handshake: at the client's own limit, that client's oldest; at the server's limit, the oldest
// of all. Idle or slow handshakes (a slowloris, from one address or many) cannot keep the slots
// from connections that do handshake. Connections past their handshake are never closed for
// room. A closed connection stops counting at once and is never served: its handshake, if it
// was being read, ends there (greet).

// makeRoom makes room under both limits for a new connection from host, evicting handshaking
// connections as needed; false means there is none to evict. s.mu is held.
func (s *Server) makeRoom(host string) bool {
	if s.perHost[host] >= s.opts.MaxPerClient {
		l := s.greeting[host]
		if l == nil || l.Len() == 0 {
			return false
		}
		s.evict(l.Front().Value.(*conn), "its client opened another at its connection limit")
	}
	if len(s.conns) >= s.opts.MaxConnections {
		if s.greeters.Len() == 0 {
			return false
		}
		s.evict(s.greeters.Front().Value.(*conn), "another connection came at the server's connection limit")
	}
	return true
}

// evict closes c, which is still in its handshake, and stops counting it. s.mu is held.
func (s *Server) evict(c *conn, why string) {
	s.greeted(c)
	s.forget(c)
	c.evicted = true
	c.log.Info("closing a connection still in its handshake: " + why)
	raw := c.nc
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn() // a TLS close may wait to write its alert; the socket's does not
	}
	_ = raw.Close() // at once, so that its file is given back before the new connection takes one
}

// greet ends c's handshake: from now on it keeps its slot. false means it was evicted meanwhile
// and must close without being served.
func (s *Server) greet(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.evicted {
		return false
	}
	s.greeted(c)
	return true
}

// greeted takes c off the lists of connections in their handshake. s.mu is held.
func (s *Server) greeted(c *conn) {
	if c.greeting == nil {
		return
	}
	l := s.greeting[c.host]
	l.Remove(c.greeting)
	c.greeting = nil
	if l.Len() == 0 {
		delete(s.greeting, c.host)
	}
	s.greeters.Remove(c.greeter)
	c.greeter = nil
}

// forget stops counting c against the limits. s.mu is held.
func (s *Server) forget(c *conn) {
	delete(s.conns, c)
	if s.perHost[c.host]--; s.perHost[c.host] == 0 {
		delete(s.perHost, c.host)
	}
}

// clientHost is the IP address of a client, the unit of the per-client connection limit.
func clientHost(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// Addr returns the listening address, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting, tells every client Disconnect once its in-flight requests are
// answered, and waits for the connections to close or ctx to end (then closes them).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	if s.ln != nil {
		s.ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.beginDisconnect()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.forceOnce.Do(func() { close(s.forced) })
		for _, c := range conns {
			c.nc.Close()
		}
		<-done
		return ctx.Err()
	}
}
