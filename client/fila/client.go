package fila

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Client is one FIBP connection to a broker node. Every method is safe for concurrent use; many
// goroutines share one connection, their requests multiplexed by request ID.
//
// Two goroutines own the socket: a reader that decodes frames and routes them to the waiting
// request or subscription, and a writer that sends everything queued since its last write in
// one write call.
type Client struct {
	conn     net.Conn
	opts     Options
	nodeID   uint64
	caps     fibp.Capabilities // active capabilities: ours AND the server's
	maxFrame int               // largest frame the server accepts (length prefix)

	mu      sync.Mutex
	pending map[uint32]*call
	subs    map[uint32]*Consumer
	nextID  uint32
	err     error // why the client stopped; nil while open
	done    chan struct{}

	out outbox // frames waiting for the writer

	fr    *wire.FrameReader
	reasm fibp.Reassembler

	leases *leaseTable
	acks   *coalescer[fibp.AckItem]
	nacks  *coalescer[fibp.NackItem]
}

// clientCapabilities is what this SDK advertises in the Handshake.
const clientCapabilities = fibp.CapCreditFlowControl

// serverInitiated is bit 31 of a request ID: set on requests the server originates.
const serverInitiated = 0x80000000

// closeFlushTimeout bounds how long Close waits for the Disconnect frame to be written.
const closeFlushTimeout = 2 * time.Second

// Dial connects to addr, optionally over TLS, and performs the Handshake. An Error frame in
// answer to the Handshake is returned as an *Error (for example ErrUnsupportedVersion with its
// max_version metadata, or ErrUnauthorized).
func Dial(ctx context.Context, addr string, opts *Options) (*Client, error) {
	o := opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fila: %w", err)
	}
	if o.TLS != nil {
		cfg := o.TLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("fila: TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	c := &Client{
		conn:     nc,
		opts:     o,
		pending:  map[uint32]*call{},
		subs:     map[uint32]*Consumer{},
		done:     make(chan struct{}),
		fr:       wire.NewFrameReader(nc, fibp.MinFrameSize, fibp.MaxFrameSize),
		reasm:    fibp.Reassembler{MaxBody: o.MaxReassembledSize, MaxPartials: maxReassemblyPartials},
		maxFrame: fibp.MaxFrameSize,
	}
	c.out.init()
	if err := c.handshake(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	c.leases = newLeaseTable(c)
	c.acks = newAckCoalescer(c)
	c.nacks = newNackCoalescer(c)
	go c.readLoop()
	go c.writeLoop()
	if o.PingInterval > 0 {
		go c.pingLoop()
	}
	return c, nil
}

// pingLoop sends keep-alive Pings and closes the connection when a Pong does not come in time.
func (c *Client) pingLoop() {
	t := time.NewTicker(c.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.done:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.PongTimeout)
		_, err := c.Ping(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			c.shutdown(fmt.Errorf("%w: no Pong within %v", ErrConnectionLost, c.opts.PongTimeout), false)
			return
		}
	}
}

// handshake sends the Handshake and waits for HandshakeOk, before the I/O goroutines start.
func (c *Client) handshake(ctx context.Context) (err error) {
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer func() {
		if !stop() && err == nil { // ctx ended just now: the deadline may be set
			err = c.handshakeIOError(ctx, ctx.Err())
		}
	}()
	hello := &fibp.Handshake{ProtocolVersion: fibp.Version, ClientCapabilities: clientCapabilities}
	if c.opts.APIKey != "" {
		hello.APIKey = wire.Some(c.opts.APIKey)
	}
	if err := hello.Check(); err != nil {
		return fmt.Errorf("fila: Handshake: %w", err)
	}
	if _, err := c.conn.Write(fibp.AppendFrame(nil, 0, 0, hello)); err != nil {
		return c.handshakeIOError(ctx, err)
	}
	var h fibp.Header
	var body []byte
	for done := false; !done; {
		raw, err := c.fr.Next()
		if err != nil {
			return c.handshakeIOError(ctx, err)
		}
		var rest []byte
		if h, rest, err = fibp.ParseHeader(raw); err == nil {
			body, done, err = c.reasm.Add(h, rest)
		}
		if err != nil {
			return invalidFrame("handshake answer: %v", err)
		}
	}
	switch h.Opcode {
	case fibp.OpError:
		var ef fibp.Error
		if err := ef.Decode(body); err != nil {
			return invalidFrame("handshake answer: %v", err)
		}
		return errorFromFrame(&ef)
	case fibp.OpHandshakeOk:
	default:
		return invalidFrame("expected HandshakeOk, got %v", h.Opcode)
	}
	var ok fibp.HandshakeOk
	if err := ok.Decode(body); err != nil {
		return invalidFrame("HandshakeOk: %v", err)
	}
	if ok.NegotiatedVersion != fibp.Version {
		return invalidFrame("server negotiated protocol version %d, this client speaks %d",
			ok.NegotiatedVersion, fibp.Version)
	}
	c.nodeID = ok.NodeID
	c.caps = clientCapabilities & ok.ServerCapabilities
	if ok.MaxFrameSize != 0 {
		c.maxFrame = int(ok.MaxFrameSize)
	}
	if c.maxFrame <= fibp.HeaderSize {
		return invalidFrame("server max_frame_size %d is too small", ok.MaxFrameSize)
	}
	c.fr.SetMax(max(c.maxFrame, fibp.MaxFrameSize))
	return nil
}

func (c *Client) handshakeIOError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return fmt.Errorf("fila: handshake: %w", err)
}

// NodeID is the node ID the server gave in HandshakeOk (0 for a single node).
func (c *Client) NodeID() uint64 { return c.nodeID }

// MaxFrameSize is the server's maximum frame size; larger requests go as continuation frames.
func (c *Client) MaxFrameSize() int { return c.maxFrame }

// Capabilities is the active capability set: those both peers advertised.
func (c *Client) Capabilities() fibp.Capabilities { return c.caps }

// Done is closed when the client stops, by Close or because the connection ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err reports why the client stopped, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close sends Disconnect, waits briefly for it to be written, and closes the connection.
// Outstanding requests fail with ErrClosed. Closing twice is harmless.
func (c *Client) Close() error {
	c.shutdown(ErrClosed, true)
	return nil
}

// shutdown stops the client once: it records cause, optionally queues a Disconnect for the
// writer's last flush, closes the socket, and fails every pending request and subscription.
func (c *Client) shutdown(cause error, graceful bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = cause
	pending, subs := c.pending, c.subs
	c.pending, c.subs = map[uint32]*call{}, map[uint32]*Consumer{}
	c.mu.Unlock()

	if graceful {
		c.out.appendFrame(0, &fibp.Disconnect{}, c.maxFrame)
	}
	close(c.done)
	if graceful {
		select {
		case <-c.out.writerDone:
		case <-time.After(closeFlushTimeout):
		}
	}
	c.conn.Close()
	for _, cl := range pending {
		cl.ch <- response{err: cause}
	}
	for _, s := range subs {
		s.terminate(cause)
	}
}

// closedErr is the error for an operation attempted after the client stopped.
func (c *Client) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}

func connLost(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return ErrConnectionLost
	}
	return fmt.Errorf("%w: %v", ErrConnectionLost, err)
}

// credits owed to subscriptions are sent by the writer just before each write, after the
// acks that earned them.
type creditGrant struct {
	id uint32
	n  uint32
}

func (c *Client) collectCredits() []creditGrant {
	var grants []creditGrant
	c.mu.Lock()
	for id, s := range c.subs {
		if n := s.owed.Swap(0); n > 0 {
			grants = append(grants, creditGrant{id, n})
		}
	}
	c.mu.Unlock()
	return grants
}
