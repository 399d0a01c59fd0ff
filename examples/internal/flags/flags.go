// Package flags holds the connection flags the examples share.
package flags

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/client/rift"
)

// Addr is the broker's FIBP address: -addr, or FILA_ADDR, or 127.0.0.1:5555.
func Addr() *string {
	return flag.String("addr", envOr("FILA_ADDR", "127.0.0.1:5555"), "broker address (env FILA_ADDR)")
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

// RiftFlags declares -rift-addr, -ca, -token-file and -server-name, with the defaults the fila
// CLI has: FILA_RIFT_ADDR or 127.0.0.1:7443, FILA_RIFT_CA, and FILA_RIFT_TOKEN (the token
// itself, used when -token-file is not given). Without them, the CA and token are those of a
// development server (fila-server --rift-listen 127.0.0.1:7443 --rift-dev-certs data/rift-certs)
// started from the repository root: data/rift-certs/ca.pem and dev-token, looked up from the
// repository root or from examples/.
func RiftFlags() *Rift {
	tokenFile := ""
	if os.Getenv("FILA_RIFT_TOKEN") == "" {
		tokenFile = devCertFile("dev-token")
	}
	return &Rift{
		addr:       flag.String("rift-addr", envOr("FILA_RIFT_ADDR", "127.0.0.1:7443"), "Rift listener (UDP) (env FILA_RIFT_ADDR)"),
		ca:         flag.String("ca", envOr("FILA_RIFT_CA", devCertFile("ca.pem")), "PEM CA of the Rift server certificate (env FILA_RIFT_CA)"),
		tokenFile:  flag.String("token-file", tokenFile, "file holding the Rift token (default: env FILA_RIFT_TOKEN, else the development token)"),
		serverName: flag.String("server-name", "localhost", "name in the server certificate"),
	}
}

// devCertFile returns data/rift-certs/name, or ../data/rift-certs/name when only that exists
// (the examples run from examples/, the server from the repository root).
func devCertFile(name string) string {
	for _, dir := range []string{"data/rift-certs", "../data/rift-certs"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name)
		}
	}
	return filepath.Join("data/rift-certs", name)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Connect connects to the Rift listener.
func (r *Rift) Connect(ctx context.Context) (*rift.Client, error) {
	tlsConf, err := rift.TLSConfig(*r.ca)
	if err != nil {
		return nil, fmt.Errorf("%w (start the server with --rift-dev-certs data/rift-certs from the repository root, or give -ca)", err)
	}
	token := os.Getenv("FILA_RIFT_TOKEN")
	if *r.tokenFile != "" {
		b, err := os.ReadFile(*r.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("token: %w (start the server with --rift-dev-certs data/rift-certs from the repository root, or give -token-file)", err)
		}
		token = string(b)
	}
	return rift.Connect(ctx, *r.addr, *r.serverName, tlsConf, strings.TrimSpace(token))
}

// Exit prints err and exits 1 when it is not nil.
func Exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
