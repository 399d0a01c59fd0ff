// Package flags holds the connection flags the examples share.
package flags

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/client/rift"
)

// Addr is the broker's FIBP address: -addr, or FILA_ADDR, or 127.0.0.1:5555.
func Addr() *string {
	def := os.Getenv("FILA_ADDR")
	if def == "" {
		def = "127.0.0.1:5555"
	}
	return flag.String("addr", def, "broker address (env FILA_ADDR)")
}

// EnsureQueue creates queue, and is content when it already exists.
func EnsureQueue(ctx context.Context, c *fila.Client, cfg fila.QueueConfig) error {
	if _, err := c.CreateQueue(ctx, cfg); err != nil && !errors.Is(err, fila.ErrQueueAlreadyExists) {
		return err
	}
	return nil
}

// Rift holds the flags that reach a Rift listener.
type Rift struct{ addr, ca, tokenFile, serverName *string }

// RiftFlags declares -rift-addr, -ca, -token-file and -server-name. With the server's
// development certificates (fila-server --rift-listen 127.0.0.1:7443 --rift-dev-certs DIR) the
// CA is DIR/ca.pem and the token DIR/dev-token.
func RiftFlags() *Rift {
	return &Rift{
		addr:       flag.String("rift-addr", "127.0.0.1:7443", "Rift listener (UDP)"),
		ca:         flag.String("ca", "data/rift-certs/ca.pem", "PEM CA of the Rift server certificate"),
		tokenFile:  flag.String("token-file", "data/rift-certs/dev-token", "file holding the Rift token"),
		serverName: flag.String("server-name", "localhost", "name in the server certificate"),
	}
}

// Connect connects to the Rift listener.
func (r *Rift) Connect(ctx context.Context) (*rift.Client, error) {
	tlsConf, err := rift.TLSConfig(*r.ca)
	if err != nil {
		return nil, err
	}
	token, err := os.ReadFile(*r.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	return rift.Connect(ctx, *r.addr, *r.serverName, tlsConf, strings.TrimSpace(string(token)))
}

// Exit prints err and exits 1 when it is not nil.
func Exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
