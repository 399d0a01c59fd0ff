package listener_test

import (
	"context"
	"crypto/tls"

	"github.com/quic-go/quic-go"
)

type tlsConf = tls.Config

const tlsV12 = tls.VersionTLS12

// contextCause returns why a connection's context ended (the close error).
func contextCause(c *quic.Conn) error { return context.Cause(c.Context()) }
