package fila

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// link is one FIBP connection of a Client. A Client without reconnection has exactly one; with
// reconnection each outage ends the current link and a new one replaces it. Request IDs, pending
// requests and subscriptions' request IDs belong to one link.
type link struct {
	conn     net.Conn
	addr     string
	nodeID   uint64
	caps     fibp.Capabilities // active capabilities: ours AND the server's
	maxFrame int               // largest frame the server accepts (length prefix)
	fr       *wire.FrameReader
	reasm    fibp.Reassembler
	out      outbox           // frames waiting for this link's writer
	pending  map[uint32]*call // guarded by Client.mu; nil once the link is torn down
	done     chan struct{}    // closed when the link is torn down
}

// connect dials addr, optionally over TLS, and performs the Handshake, all within DialTimeout
// and ctx. An Error frame in answer to the Handshake is returned as an *Error.
func connect(ctx context.Context, addr string, o *Options, dial dialFunc) (*link, error) {
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	nc, err := dial(ctx, addr)
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
			if mistake := explainTLS(addr, err); mistake != nil {
				return nil, mistake
			}
			return nil, fmt.Errorf("fila: TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	l := &link{
		conn:     nc,
		addr:     addr,
		fr:       wire.NewFrameReader(nc, fibp.MinFrameSize, fibp.MaxFrameSize),
		reasm:    fibp.Reassembler{MaxBody: o.MaxReassembledSize, MaxPartials: maxReassemblyPartials},
		maxFrame: fibp.MaxFrameSize,
		pending:  map[uint32]*call{},
		done:     make(chan struct{}),
	}
	l.out.init()
	if err := l.handshake(ctx, o.APIKey); err != nil {
		nc.Close()
		if mistake := explainHandshake(ctx, addr, o, dial, err); mistake != nil {
			return nil, mistake
		}
		return nil, err
	}
	return l, nil
}

// dialTCP is the default dialFunc.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// handshake sends the Handshake and waits for HandshakeOk, before the I/O goroutines start.
func (l *link) handshake(ctx context.Context, apiKey string) (err error) {
	stop := context.AfterFunc(ctx, func() { l.conn.SetDeadline(time.Now()) })
	defer func() {
		if !stop() && err == nil { // ctx ended just now: the deadline may be set
			err = handshakeIOError(ctx, ctx.Err())
		}
	}()
	hello := &fibp.Handshake{ProtocolVersion: fibp.Version, ClientCapabilities: clientCapabilities}
	if apiKey != "" {
		hello.APIKey = wire.Some(apiKey)
	}
	if err := hello.Check(); err != nil {
		return fmt.Errorf("fila: Handshake: %w", err)
	}
	if _, err := l.conn.Write(fibp.AppendFrame(nil, 0, 0, hello)); err != nil {
		return handshakeIOError(ctx, err)
	}
	defer nudge(l.conn)()
	var h fibp.Header
	var body []byte
	for done := false; !done; {
		raw, err := l.fr.Next()
		if err != nil {
			return handshakeIOError(ctx, err)
		}
		var rest []byte
		if h, rest, err = fibp.ParseHeader(raw); err == nil {
			body, done, err = l.reasm.Add(h, rest)
		}
		if err != nil {
			return invalidFrame("handshake answer: %v", err)
		}
	}
	return l.handshakeAnswer(h, body)
}

// handshakeAnswer checks the server's answer to the Handshake and records what it advertised.
func (l *link) handshakeAnswer(h fibp.Header, body []byte) error {
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
	l.nodeID = ok.NodeID
	l.caps = clientCapabilities & ok.ServerCapabilities
	if ok.MaxFrameSize != 0 {
		l.maxFrame = int(ok.MaxFrameSize)
	}
	if l.maxFrame <= fibp.HeaderSize {
		return invalidFrame("server max_frame_size %d is too small", ok.MaxFrameSize)
	}
	l.fr.SetMax(max(l.maxFrame, fibp.MaxFrameSize))
	return nil
}

func handshakeIOError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return fmt.Errorf("fila: handshake: %w", err)
}
