package fibptest

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// HandshakeKey performs the handshake presenting apiKey (none when empty) and returns the
// answer: a HandshakeOk, or the Error frame that refused it.
func (c *Client) HandshakeKey(apiKey string) fibp.Frame {
	c.T.Helper()
	hs := &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl}
	if apiKey != "" {
		hs.APIKey = wire.Some(apiKey)
	}
	c.Send(0, hs)
	_, f := c.Next()
	return f
}

// Closed reports whether the server closes the connection without sending anything more (it
// waits up to ReadWait for either).
func (c *Client) Closed() bool {
	c.T.Helper()
	_ = c.NC.SetReadDeadline(time.Now().Add(ReadWait))
	n, err := c.NC.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return n == 0 && (errors.Is(err, io.EOF) || err != nil)
}
