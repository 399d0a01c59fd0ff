package main

import (
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/filamq/fila/client/fila"
)

// explainConnect turns a connection-level mistake into a line that says what to change.
func (a *app) explainConnect(err error) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.Is(err, fila.ErrTLSRequired):
		return fmt.Errorf("the server at %s expects TLS: pass --tls (and --ca FILE unless a system CA signed its certificate)", a.addr)
	case errors.Is(err, fila.ErrTLSNotServed):
		return fmt.Errorf("the server at %s does not speak TLS: drop --tls, --ca, --cert and --key", a.addr)
	case errors.Is(err, fila.ErrHTTPServer):
		return fmt.Errorf("this is an HTTP server, not FIBP: point --addr (%s) at the broker's FIBP port (default 5555)", a.addr)
	case errors.Is(err, fila.ErrUnauthorized) && a.apiKey == "":
		return fmt.Errorf("the server requires an API key: pass --api-key or set FILA_API_KEY (%w)", err)
	case errors.Is(err, fila.ErrUnauthorized):
		return fmt.Errorf("the server rejected the API key: %w", err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("the server's certificate is not signed by a CA this client trusts: pass --ca FILE (%w)", err)
	case errors.As(err, &hostname):
		return fmt.Errorf("the server's certificate does not name %q: pass --server-name NAME (%w)", hostname.Host, err)
	}
	return err
}
