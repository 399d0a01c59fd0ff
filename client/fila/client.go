package fila

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/client/internal/backoff"
	"github.com/filamq/fila/generated/fibp"
)

// Client is a FIBP connection to a broker node. Every method is safe for concurrent use; many
// goroutines share one connection, their requests multiplexed by request ID.
//
// Two goroutines own the socket: a reader that decodes frames and routes them to the waiting
// request or subscription, and a writer that sends everything queued since its last write in
// one write call.
//
// With Options.MaxReconnects set, a Client outlives its connection: when the connection drops it
// dials again (see Options.MaxReconnects) and its Producers and Consumers go on over the new
// connection. Otherwise the Client stops when its connection ends.
type Client struct {
	opts  Options
	seeds []string
	log   *slog.Logger
	dial  dialFunc
	sleep func(time.Duration) bool // waits d unless the client stops first (reports false)
	rand  func() float64           // [0, 1), for the reconnect jitter

	cur  atomic.Pointer[link] // the live connection; nil while disconnected; stored under mu
	last atomic.Pointer[link] // the most recent connection

	mu       sync.Mutex
	subs     map[uint32]*Consumer // subscriptions of the current link, by request ID
	orphans  []*Consumer          // subscriptions waiting for the next link
	nextID   uint32
	err      error         // why the client stopped; nil while open (connected or not)
	up       chan struct{} // closed while a link is live; replaced when it drops
	lastErr  error         // why the current outage began, or its last dial failure
	attempts int           // dial attempts of the current outage

	done     chan struct{}
	life     context.Context // ends when the client stops
	lifeStop context.CancelFunc

	router settleRouter // the Cluster this is a node connection of; nil for a plain Client

	leases *leaseTable
	acks   *coalescer[fibp.AckItem]
	nacks  *coalescer[fibp.NackItem]
}

// dialFunc opens the transport connection to addr.
type dialFunc func(ctx context.Context, addr string) (net.Conn, error)

// clientCapabilities is what this SDK advertises in the Handshake.
const clientCapabilities = fibp.CapCreditFlowControl

// serverInitiated is bit 31 of a request ID: set on requests the server originates.
const serverInitiated = 0x80000000

// closeFlushTimeout bounds how long Close waits for the Disconnect frame to be written.
const closeFlushTimeout = 2 * time.Second

// Dial connects to addr, optionally over TLS, and performs the Handshake. An Error frame in
// answer to the Handshake is returned as an *Error (for example ErrUnsupportedVersion with its
// max_version metadata, or ErrUnauthorized). It is DialSeeds with one address.
func Dial(ctx context.Context, addr string, opts *Options) (*Client, error) {
	return DialSeeds(ctx, []string{addr}, opts)
}

// DialSeeds connects to the first of addrs that answers, trying them in turn once each; the
// error is the last address's failure. With Options.DialRetry it tries them again, round after
// round, until one answers (see DialRetry). Reconnection (Options.MaxReconnects) tries them in
// turn too, starting with the one that was last connected.
func DialSeeds(ctx context.Context, addrs []string, opts *Options) (*Client, error) {
	return dialSeeds(ctx, addrs, opts.withDefaults(), dialTCP)
}

func dialSeeds(ctx context.Context, addrs []string, o Options, dial dialFunc) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("fila: no address to dial")
	}
	c := &Client{
		opts:  o,
		seeds: append([]string(nil), addrs...),
		log:   o.Logger,
		dial:  dial,
		rand:  backoff.RandFloat,
		subs:  map[uint32]*Consumer{},
		up:    make(chan struct{}),
		done:  make(chan struct{}),
	}
	c.life, c.lifeStop = context.WithCancel(context.Background())
	c.sleep = c.sleepTimer
	l, err := c.firstDial(ctx)
	if err != nil {
		c.lifeStop()
		return nil, err
	}
	c.leases = newLeaseTable(c)
	c.acks = newAckCoalescer(c)
	c.nacks = newNackCoalescer(c)
	c.mu.Lock()
	c.installLocked(l)
	c.mu.Unlock()
	c.startLink(l)
	return c, nil
}

// installLocked makes l the live connection and wakes the calls waiting for one. c.mu is held.
func (c *Client) installLocked(l *link) {
	c.cur.Store(l)
	c.last.Store(l)
	c.attempts, c.lastErr = 0, nil
	close(c.up)
}

// startLink starts l's goroutines; l must be installed first, so that their failures count.
func (c *Client) startLink(l *link) {
	go c.readLoop(l)
	go c.writeLoop(l)
	if c.opts.PingInterval > 0 {
		go c.pingLoop(l)
	}
}

// pingLoop sends keep-alive Pings on l and ends l when a Pong does not come in time.
func (c *Client) pingLoop(l *link) {
	t := time.NewTicker(c.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-l.done:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.PongTimeout)
		_, err := c.Ping(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && c.cur.Load() == l {
			c.linkLost(l, fmt.Errorf("%w: no Pong within %v", ErrConnectionLost, c.opts.PongTimeout))
			return
		}
	}
}

// NodeID is the node ID the server gave in HandshakeOk (0 for a single node), of the most
// recent connection.
func (c *Client) NodeID() uint64 { return c.last.Load().nodeID }

// Addr is the address of the most recent connection: with DialSeeds, the one that answered.
func (c *Client) Addr() string { return c.last.Load().addr }

// MaxFrameSize is the server's maximum frame size (of the most recent connection); larger
// requests go as continuation frames.
func (c *Client) MaxFrameSize() int { return c.last.Load().maxFrame }

// Capabilities is the active capability set of the most recent connection: those both peers
// advertised.
func (c *Client) Capabilities() Capabilities { return c.last.Load().caps }

// Connected reports whether the client has a live connection now.
func (c *Client) Connected() bool { return c.cur.Load() != nil }

// Done is closed when the client stops for good: by Close, because the connection ended and
// reconnection is off, or because reconnection gave up.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err reports why the client stopped, or nil while it is open (connected or reconnecting).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close sends Disconnect, waits briefly for it to be written, and closes the connection.
// Outstanding requests fail with ErrClosed; so do calls waiting for a reconnection. Closing twice
// is harmless.
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
	l := c.cur.Swap(nil)
	var pending map[uint32]*call
	if l != nil {
		pending, l.pending = l.pending, nil
	}
	subs := c.orphans
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.subs, c.orphans = map[uint32]*Consumer{}, nil
	c.mu.Unlock()

	if l != nil && graceful {
		l.out.appendFrame(0, &fibp.Disconnect{}, l.maxFrame)
	}
	close(c.done)
	c.lifeStop()
	if l != nil {
		close(l.done)
		if graceful {
			select {
			case <-l.out.writerDone:
			case <-time.After(closeFlushTimeout):
			}
		}
		l.conn.Close()
	}
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

// collectCredits takes what is owed to the subscriptions of l, when l is the live link.
func (c *Client) collectCredits(l *link) []creditGrant {
	var grants []creditGrant
	c.mu.Lock()
	if c.cur.Load() == l {
		for id, s := range c.subs {
			if n := s.owed.Swap(0); n > 0 {
				grants = append(grants, creditGrant{id, n})
			}
		}
	}
	c.mu.Unlock()
	return grants
}
