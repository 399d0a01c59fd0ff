// Package fibptest is a scripted FIBP server for tests: a real TCP listener on 127.0.0.1:0 that
// reads frames with wire.FrameReader, reassembles continuations, and answers with generated
// frames. Tests either take connections one by one (Accept) and script every frame, or install a
// Handler that answers each request.
package fibptest

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Timeout bounds every blocking helper so that a broken test fails instead of hanging.
const Timeout = 5 * time.Second

// Options configures a Peer.
type Options struct {
	// MaxFrameSize is advertised in HandshakeOk (0 = the protocol default).
	MaxFrameSize uint32
	// NodeID is advertised in HandshakeOk.
	NodeID uint64
	// NoCreditFlowControl clears CREDIT_FLOW_CONTROL from the server capabilities.
	NoCreditFlowControl bool
	// Handshake, when set, chooses the answer to the client's Handshake (HandshakeOk or Error).
	// Returning nil closes the connection without an answer.
	Handshake func(*fibp.Handshake) fibp.Frame
	// TLS, when set, makes the listener speak TLS with this configuration.
	TLS *tls.Config
	// Handler, when set, is called for every frame after the handshake on its own goroutine per
	// connection; connections are then not offered to Accept.
	Handler func(c *Conn, f Frame)
}

// Peer is a scripted FIBP server.
type Peer struct {
	t     testing.TB
	opts  Options
	ln    net.Listener
	conns chan *Conn
	wg    sync.WaitGroup

	mu  sync.Mutex
	all []*Conn
}

// Start listens on 127.0.0.1:0 and serves until the test ends.
func Start(t testing.TB, opts Options) *Peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fibptest: listen: %v", err)
	}
	if opts.TLS != nil {
		ln = tls.NewListener(ln, opts.TLS)
	}
	p := &Peer{t: t, opts: opts, ln: ln, conns: make(chan *Conn, 16)}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr is the listener's host:port.
func (p *Peer) Addr() string { return p.ln.Addr().String() }

// Close stops listening and closes every connection.
func (p *Peer) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.all {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Peer) acceptLoop() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := newConn(nc)
		p.mu.Lock()
		p.all = append(p.all, c)
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if !p.handshake(c) {
				c.Close()
				return
			}
			if p.opts.Handler == nil {
				p.conns <- c
				return
			}
			p.serve(c)
		}()
	}
}

func (p *Peer) handshake(c *Conn) bool {
	f, err := c.Read()
	if err != nil || f.Header.Opcode != fibp.OpHandshake {
		return false
	}
	c.Hello = f.Frame.(*fibp.Handshake)
	c.HelloHeader = f.Header
	var answer fibp.Frame = &fibp.HandshakeOk{
		NegotiatedVersion:  fibp.Version,
		NodeID:             p.opts.NodeID,
		MaxFrameSize:       p.opts.MaxFrameSize,
		ServerCapabilities: fibp.CapCreditFlowControl,
	}
	if p.opts.NoCreditFlowControl {
		answer.(*fibp.HandshakeOk).ServerCapabilities = 0
	}
	if p.opts.Handshake != nil {
		answer = p.opts.Handshake(c.Hello)
	}
	if answer == nil {
		return false
	}
	if err := c.Send(0, answer); err != nil {
		return false
	}
	_, isOk := answer.(*fibp.HandshakeOk)
	return isOk
}

func (p *Peer) serve(c *Conn) {
	defer c.Close()
	for {
		f, err := c.Read()
		if err != nil {
			return
		}
		p.opts.Handler(c, f)
	}
}

// Accept returns the next connection that completed its handshake (only without a Handler).
func (p *Peer) Accept(t testing.TB) *Conn {
	t.Helper()
	select {
	case c := <-p.conns:
		return c
	case <-time.After(Timeout):
		t.Fatalf("fibptest: no connection within %v", Timeout)
		return nil
	}
}

// Chunk describes one frame as it travelled on the wire, before reassembly.
type Chunk struct {
	Flags  fibp.FrameFlags
	Length int // the length prefix
}

// Frame is one complete (reassembled) frame received by the peer. Body and Frame do not alias
// the connection's buffers.
type Frame struct {
	Header fibp.Header // Flags of the last chunk
	Body   []byte      // the body after the header
	Frame  fibp.Frame  // nil for an unknown opcode
	Chunks []Chunk
}

// Conn is one server-side connection.
type Conn struct {
	nc  net.Conn
	fr  *wire.FrameReader
	re  fibp.Reassembler
	wmu sync.Mutex

	// Hello is the client's Handshake, HelloHeader its header.
	Hello       *fibp.Handshake
	HelloHeader fibp.Header

	chunks map[uint32][]Chunk
}

func newConn(nc net.Conn) *Conn {
	return &Conn{
		nc:     nc,
		fr:     wire.NewFrameReader(nc, fibp.MinFrameSize, fibp.MaxFrameSize),
		chunks: map[uint32][]Chunk{},
	}
}

// Read returns the next complete frame. Decode failures are returned as errors.
func (c *Conn) Read() (Frame, error) {
	for {
		raw, err := c.fr.Next()
		if err != nil {
			return Frame{}, err
		}
		h, rest, err := fibp.ParseHeader(raw)
		if err != nil {
			return Frame{}, err
		}
		c.chunks[h.RequestID] = append(c.chunks[h.RequestID], Chunk{Flags: h.Flags, Length: len(raw)})
		body, done, err := c.re.Add(h, rest)
		if err != nil {
			return Frame{}, err
		}
		if !done {
			continue
		}
		f := Frame{Header: h, Body: bytes.Clone(body), Chunks: c.chunks[h.RequestID]}
		delete(c.chunks, h.RequestID)
		if h.Opcode.Known() {
			f.Frame, err = fibp.Decode(h.Opcode, f.Body)
			if err != nil {
				return f, fmt.Errorf("fibptest: %w", err)
			}
		}
		return f, nil
	}
}

// Next reads the next frame, failing the test after Timeout. Call it from the test goroutine.
func (c *Conn) Next(t testing.TB) Frame {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(Timeout))
	defer c.nc.SetReadDeadline(time.Time{})
	f, err := c.Read()
	if err != nil {
		t.Fatalf("fibptest: read: %v", err)
	}
	return f
}

// Expect reads the next frame and fails the test unless its opcode is op.
func (c *Conn) Expect(t testing.TB, op fibp.Opcode) Frame {
	t.Helper()
	f := c.Next(t)
	if f.Header.Opcode != op {
		t.Fatalf("fibptest: got %v (request %d), want %v", f.Header.Opcode, f.Header.RequestID, op)
	}
	return f
}

// ExpectQuiet fails the test if any frame arrives within d.
func (c *Conn) ExpectQuiet(t testing.TB, d time.Duration) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	defer c.nc.SetReadDeadline(time.Time{})
	f, err := c.Read()
	var ne net.Error
	if err == nil {
		t.Fatalf("fibptest: unexpected %v (request %d)", f.Header.Opcode, f.Header.RequestID)
	}
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("fibptest: read: %v", err)
	}
}

// Send writes fr as one frame with the given request ID.
func (c *Conn) Send(id uint32, fr fibp.Frame) error {
	return c.SendRaw(fibp.AppendFrame(nil, 0, id, fr))
}

// Reply answers f with fr, echoing its request ID.
func (c *Conn) Reply(f Frame, fr fibp.Frame) error { return c.Send(f.Header.RequestID, fr) }

// SendContinued writes fr split into frames of at most maxFrame bytes.
func (c *Conn) SendContinued(id uint32, fr fibp.Frame, maxFrame int) error {
	return c.SendRaw(fibp.AppendContinued(nil, fr.Opcode(), id, fr.AppendTo(nil), maxFrame))
}

// SendRaw writes bytes as they are (frames built with the generated helpers).
func (c *Conn) SendRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// Close closes the connection.
func (c *Conn) Close() { c.nc.Close() }
