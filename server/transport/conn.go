package transport

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/session"
)

// conn is one client connection. Its reader goroutine (serve) decodes frames and dispatches
// them; answers come back from queue actors through the outbound queue, written by a second
// goroutine; a third sends keepalive pings.
type conn struct {
	s       *Server
	nc      net.Conn
	id      uint64
	session string // id in decimal: the service's name for this connection (service.SubscribeRequest.Session)
	log     *slog.Logger

	host     string        // client IP address (per-client limit)
	greeting *list.Element // in s.greeting while the handshake runs; s.mu guards it
	greeter  *list.Element // in s.greeters while the handshake runs; s.mu guards it
	evicted  bool          // closed for room during its handshake (makeRoom); s.mu guards it

	acct     *membudget.Account // nil when memory is not accounted
	out      *outbound
	fr       *wire.FrameReader
	reasm    fibp.Reassembler
	expireAt time.Time // when idle partial bodies are next looked for
	expired  []uint32
	caps     fibp.Capabilities
	inflight chan struct{} // one token per request awaiting an answer
	pending  sync.WaitGroup
	creates  sync.WaitGroup // CreateQueue requests running beside the reader (adminasync.go)
	admins   sync.WaitGroup // other admin requests running beside the reader
	consumes sync.WaitGroup // Subscribes running beside the reader (consumeaside.go)

	subs map[uint32]*subRef // by Consume request ID; reader goroutine only
	// The subscriptions the broker ended (their queue was deleted), for the reader to forget
	// (dropEnded); hasEnded tells it there are some.
	endedMu  sync.Mutex
	ended    []*subRef
	hasEnded atomic.Bool

	// The connection's API key (authz.go); nil when authentication is off. Reader goroutine only.
	auth   *auth.Store
	who    *auth.Principal
	whoGen uint64
	// recheck asks the reader to check the key again, and to forget the subscriptions the broker
	// ended, although no request came (authz.go).
	recheck  atomic.Bool
	wakeMu   sync.Mutex // orders wakeReader's deadline with skipping
	skipping bool       // the reader discards a refused body: a wake must not cut it (under wakeMu)

	lastRecv      atomic.Int64 // Unix nanoseconds of the last frame received
	pingID        atomic.Uint32
	pingSentAt    atomic.Int64 // 0 = no ping outstanding
	nextPing      uint32
	disconnecting atomic.Bool
	done          chan struct{}

	// Decoding targets and item buffers reused for every frame of their kind (the broker copies
	// the items it keeps before it returns).
	rd        wire.Reader // decodes Enqueue bodies with a memory allowance
	enq       fibp.Enqueue
	ack       fibp.Ack
	nack      fibp.Nack
	ext       fibp.ExtendLease
	ackItems  []service.AckItem
	nackItems []service.NackItem
	extItems  []service.ExtendItem
}

type subRef struct {
	id    uint32 // the Consume's request ID, its key in conn.subs
	queue string
	sub   service.Subscription // nil when the Subscribe failed
	// ready is closed once the Subscribe, which runs beside the reader, returned (consumeaside.go);
	// sub is read only after it.
	ready chan struct{}
}

// subscribed waits until the ref's Subscribe returned and reports whether it succeeded.
func (r *subRef) subscribed() bool {
	<-r.ready
	return r.sub != nil
}

// connMemory is what an open connection costs before it holds anything: its read buffer, its
// goroutines' stacks and its structures.
const connMemory = 64<<10 + 32<<10

// newConn returns the connection, or nil when the memory budget cannot take one more.
func newConn(s *Server, nc net.Conn, id uint64) *conn {
	c := &conn{
		s: s, nc: nc, id: id, session: strconv.FormatUint(id, 10),
		log:      s.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		inflight: make(chan struct{}, s.opts.MaxInflight),
		subs:     map[uint32]*subRef{},
		done:     make(chan struct{}),
	}
	c.acct = s.opts.Budget.Open(s.opts.MaxConnectionMemory, c.cut)
	if err := c.acct.Reserve(connMemory); err != nil {
		c.acct.Close()
		return nil
	}
	c.out = newOutbound(s.opts.WriteQueueBytes, c.acct)
	c.fr = wire.NewFrameReader(nc, fibp.HeaderSize, s.opts.MaxFrameSize)
	c.reasm = fibp.Reassembler{MaxBody: s.opts.MaxReassembly, MaxPartials: s.opts.MaxPartials}
	if c.acct != nil {
		c.fr.SetBudget(c.acct)
		c.reasm.Budget = c.acct
	}
	return c
}

// cut closes a connection that holds the most memory when the server-wide budget is full.
func (c *conn) cut() {
	c.log.Warn("closing the connection that holds the most memory: the server's memory budget is full",
		"held", c.acct.Used(), "budget", c.s.opts.Budget.Limit())
	c.nc.Close()
}

// release gives back what the connection still holds once it has stopped.
func (c *conn) release() {
	c.reasm.Close()
	c.fr.Shrink(0)
	c.acct.Release(connMemory)
	c.acct.Close()
}

// serve runs the connection until it closes.
func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		if err := c.out.run(c.nc, c.s.opts.WriteTimeout); err != nil && !errors.Is(err, net.ErrClosed) {
			c.log.Debug("write failed; closing", "err", err)
			c.nc.Close()
		}
	}()
	defer func() {
		for id, ref := range c.subs {
			c.endSubscription(id, ref)
		}
		c.awaitAnswers() // every answer queued before the writer stops
		if c.disconnecting.Load() {
			c.send(0, &fibp.Disconnect{})
		}
		c.out.close()
		<-writerDone
		c.nc.Close()
		c.release()
		close(c.done)
	}()
	if !c.handshake() {
		return
	}
	changed, expires := c.keyWatch() // here: the reader alone uses c.who from now on
	go c.keepalive(changed, expires)
	for {
		body, err := c.fr.Next()
		if err != nil {
			if c.recheck.Load() && errors.Is(err, os.ErrDeadlineExceeded) && !c.disconnecting.Load() {
				c.recheckKey()
				continue
			}
			if !c.readFailed(err) {
				return
			}
			continue
		}
		now := time.Now()
		c.lastRecv.Store(now.UnixNano())
		c.expirePartials(now)
		h, rest, err := fibp.ParseHeader(body)
		if err != nil { // cannot happen: the reader enforces HeaderSize
			return
		}
		if h.Flags&^fibp.FlagContinuation != 0 {
			c.sendError(h.RequestID, fibp.CodeInvalidFrame, fmt.Sprintf("reserved flag bits set (%#x)", uint8(h.Flags)), nil)
			continue
		}
		full, complete, err := c.reasm.AddAt(h, rest, now)
		if err != nil {
			if !c.sendMemoryError(h.RequestID, err) {
				c.sendError(h.RequestID, fibp.CodeInvalidFrame, err.Error(), nil)
			}
			continue
		}
		if !complete {
			continue
		}
		if !c.handle(h, full) {
			return
		}
		c.reasm.Release()
		c.shrink(len(full))
	}
}

// expirePartials drops partial bodies that received no chunk for ReassemblyTimeout, answering
// each request InvalidFrame. It looks at most four times per timeout.
func (c *conn) expirePartials(now time.Time) {
	if c.reasm.Pending() == 0 || now.Before(c.expireAt) {
		return
	}
	timeout := c.s.opts.ReassemblyTimeout
	c.expireAt = now.Add(timeout / 4)
	c.expired = c.reasm.Expire(now.Add(-timeout), c.expired[:0])
	for _, id := range c.expired {
		c.sendError(id, fibp.CodeInvalidFrame, fmt.Sprintf("continued body received no frame for %v; discarded", timeout), nil)
	}
}

// retryAfterMemory is the back-off suggested when a bound on held memory refuses a request.
const retryAfterMemory = "100"

// sendMemoryError answers a request that a memory bound refused, and reports whether err was
// such a refusal: ChannelFull with a retry time when the request fits the bound once held memory
// is released, InvalidFrame when it can never fit.
func (c *conn) sendMemoryError(requestID uint32, err error) bool {
	var full *membudget.FullError
	if !errors.As(err, &full) {
		return false
	}
	if full.Retryable() {
		c.sendError(requestID, fibp.CodeChannelFull, fmt.Sprintf("the %s holds too much memory for this request (%d bytes held, %d more needed, bound %d); retry later",
			full.Scope, full.Used, full.Need, full.Limit), map[string]string{fibp.MetaRetryAfterMs: retryAfterMemory})
	} else {
		c.sendError(requestID, fibp.CodeInvalidFrame, fmt.Sprintf("the request needs %d bytes of memory, more than the %s bound of %d", full.Need, full.Scope, full.Limit), nil)
	}
	return true
}

// keepDecoded bounds the memory a connection keeps between frames in its reused decoding targets
// and large-frame buffer: what one large frame needed is let go once it is handled.
const keepDecoded = 256 << 10

// shrink drops the reused decoding targets and buffers that outgrew keepDecoded. Targets that
// alias a large body (a dropped buffer, a reassembled body) go with it, so that their payloads do
// not keep it alive.
func (c *conn) shrink(bodyLen int) {
	if c.fr.Shrink(keepDecoded) || bodyLen > keepDecoded {
		c.enq, c.ack, c.nack, c.ext = fibp.Enqueue{}, fibp.Ack{}, fibp.Nack{}, fibp.ExtendLease{}
		c.ackItems, c.nackItems, c.extItems = nil, nil, nil
		return
	}
	if cap(c.enq.Messages)*int(unsafe.Sizeof(fibp.EnqueueMessage{})) > keepDecoded {
		c.enq = fibp.Enqueue{}
	}
	if cap(c.ack.Items)*int(unsafe.Sizeof(fibp.AckItem{})) > keepDecoded {
		c.ack, c.ackItems = fibp.Ack{}, nil
	}
	if cap(c.nack.Items)*int(unsafe.Sizeof(fibp.NackItem{})) > keepDecoded {
		c.nack, c.nackItems = fibp.Nack{}, nil
	}
	if cap(c.ext.Items)*int(unsafe.Sizeof(fibp.ExtendLeaseItem{})) > keepDecoded {
		c.ext, c.extItems = fibp.ExtendLease{}, nil
	}
}

// readFailed handles a FrameReader error; it reports whether reading can go on.
func (c *conn) readFailed(err error) bool {
	var fse *wire.FrameSizeError
	var be *wire.BufferError
	switch {
	case errors.As(err, &be):
		head, serr := c.skipRefused()
		if serr != nil {
			return false
		}
		h, _, _ := fibp.ParseHeader(head)
		c.sendMemoryError(h.RequestID, err)
		return true
	case errors.As(err, &fse) && fse.Length >= fibp.HeaderSize:
		head, serr := c.skipRefused()
		if serr != nil {
			return false
		}
		h, _, _ := fibp.ParseHeader(head)
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, fmt.Sprintf("frame of %d bytes exceeds the maximum of %d", fse.Length, c.s.opts.MaxFrameSize), nil)
		return true
	case errors.As(err, &fse):
		c.sendError(0, fibp.CodeInvalidFrame, fmt.Sprintf("frame of %d bytes is shorter than its %d-byte header", fse.Length, fibp.HeaderSize), nil)
		return false
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded):
		return false
	default:
		c.log.Debug("read failed", "err", err)
		return false
	}
}

// maxHandshakeFrame bounds the first frame: a client that has not authenticated must not make
// the server reserve a large-frame buffer (up to MaxFrameSize) against the memory budget that
// every client shares. It is the largest Handshake there is: the header, protocol_version (u16),
// api_key (present flag, u16 length and at most 65,535 bytes) and client_capabilities (u32).
const maxHandshakeFrame = fibp.HeaderSize + 2 + 1 + 2 + math.MaxUint16 + 4

// handshake reads and answers the Handshake; false means the connection must close.
func (c *conn) handshake() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.opts.HandshakeTimeout))
	c.fr.SetMax(min(maxHandshakeFrame, c.s.opts.MaxFrameSize))
	defer func() {
		c.fr.SetMax(c.s.opts.MaxFrameSize)
		if !c.disconnecting.Load() {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
	}()
	body, err := c.fr.Next()
	if err != nil {
		var fse *wire.FrameSizeError
		if errors.As(err, &fse) {
			c.sendError(0, fibp.CodeInvalidFrame, "the first frame must be a Handshake", nil)
		}
		return false
	}
	h, rest, _ := fibp.ParseHeader(body)
	var hs fibp.Handshake
	if h.Opcode != fibp.OpHandshake || h.Flags != 0 {
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, fmt.Sprintf("the first frame must be a Handshake, not %v", h.Opcode), nil)
		return false
	}
	if err := hs.Decode(rest); err != nil {
		c.sendError(0, fibp.CodeInvalidFrame, err.Error(), nil)
		return false
	}
	if hs.ProtocolVersion < fibp.Version {
		c.sendError(0, fibp.CodeUnsupportedVersion, fmt.Sprintf("protocol version %d is not supported", hs.ProtocolVersion),
			map[string]string{fibp.MetaMaxVersion: strconv.Itoa(fibp.Version)})
		return false
	}
	if !c.authenticate(hs.APIKey) {
		return false
	}
	if !c.s.greet(c) {
		return false // closed for room meanwhile: never served
	}
	const serverCaps = fibp.CapCreditFlowControl
	c.caps = hs.ClientCapabilities & serverCaps
	c.send(0, &fibp.HandshakeOk{
		NegotiatedVersion:  fibp.Version,
		NodeID:             c.s.opts.NodeID,
		MaxFrameSize:       uint32(c.s.opts.MaxFrameSize),
		ServerCapabilities: serverCaps,
	})
	c.lastRecv.Store(time.Now().UnixNano())
	return true
}

// send queues a frame. A connection whose queue is full is cut.
func (c *conn) send(requestID uint32, f fibp.Frame) {
	c.sendRaw(session.AppendFrame(nil, requestID, f), nil)
}

func (c *conn) sendRaw(frame []byte, onWritten func()) bool {
	ok, overflow := c.out.push(frame, onWritten)
	if overflow {
		c.log.Warn("closing a connection that does not read its answers", "queued_limit", c.s.opts.WriteQueueBytes,
			"held", c.acct.Used(), "memory_bound", c.acct.Limit())
		c.nc.Close()
	}
	return ok
}

func (c *conn) sendError(requestID uint32, code fibp.ErrorCode, msg string, meta map[string]string) {
	c.s.countError(code)
	c.logDenied(code, msg)
	c.send(requestID, &fibp.Error{ErrorCode: code, Message: session.ErrorMessage(msg), Metadata: meta})
}

func (c *conn) sendServiceError(requestID uint32, e *service.Error) {
	c.s.countCode(e.Code)
	c.send(requestID, session.ErrorFrame(e))
}

// Send implements session.Out: the session's sink queues this connection's deliveries with it.
func (c *conn) Send(frame []byte, onWritten func()) bool { return c.sendRaw(frame, onWritten) }

// awaitAnswers waits until every request in flight is answered, or until a shutdown ran out of
// time: the connection is then released without them.
func (c *conn) awaitAnswers() {
	answered := make(chan struct{})
	go func() { c.pending.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-c.s.forced:
		c.log.Warn("closing with requests unanswered: the shutdown timed out")
	}
}

// begin accounts for a request that will be answered asynchronously; it blocks while the
// connection already has MaxInflight requests waiting (backpressure on the socket). It reports
// false, releasing the request's mem bytes, when a shutdown ran out of time meanwhile.
func (c *conn) begin(mem int64) bool {
	select {
	case c.inflight <- struct{}{}:
		c.pending.Add(1)
		return true
	case <-c.s.forced:
		c.acct.Release(mem)
		return false
	}
}

func (c *conn) end() {
	<-c.inflight
	c.pending.Done()
}

// serverInitiated is bit 31 of a request ID: set on frames the server originates (its Pings),
// clear on the client's requests and so on every answer and Delivery.
const serverInitiated = 0x80000000

// keepalive pings an idle peer and closes the connection when a ping goes unanswered; changed
// and expires are keyWatch's, taken by the reader before it started keepalive (the reader
// replaces c.who when the key store changes).
func (c *conn) keepalive(changed <-chan struct{}, expires bool) {
	tick := time.NewTicker(min(c.s.opts.PingInterval, c.s.opts.PongTimeout) / 2)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-changed:
			changed = c.auth.Changed()
			c.wakeReader()
		case now := <-tick.C:
			if expires {
				c.wakeReader()
			}
			if sent := c.pingSentAt.Load(); sent != 0 {
				if now.Sub(time.Unix(0, sent)) > c.s.opts.PongTimeout {
					c.log.Info("no Pong within the timeout; closing")
					c.nc.Close()
					return
				}
				continue
			}
			if now.Sub(time.Unix(0, c.lastRecv.Load())) >= c.s.opts.PingInterval {
				c.nextPing++
				if c.nextPing == 0 || c.nextPing >= serverInitiated {
					c.nextPing = 1
				}
				id := serverInitiated | c.nextPing
				c.pingID.Store(id)
				c.pingSentAt.Store(now.UnixNano())
				c.send(id, &fibp.Ping{})
			}
		}
	}
}

// beginDisconnect (server shutdown) stops reading new requests; the connection then answers what
// is in flight, says Disconnect and closes.
func (c *conn) beginDisconnect() {
	if c.disconnecting.CompareAndSwap(false, true) {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}
