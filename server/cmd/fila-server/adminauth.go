package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// The HTTP admin API's callers (docs/admin-api.md): with authentication on, an API key in
// Authorization: Bearer <key>, checked as a FIBP Handshake's key is (unknown, revoked or expired
// keys refused), then its ACL as FIBP checks it; with authentication off, clients on loopback
// only, which may do everything. A request with an Origin header (sent by a web page) is refused
// whatever it asks: cookies are never read, and no page is to drive the API from a browser.

// caller authenticates r's sender against b's keys. It answers the key (nil, the anonymous
// caller who may do everything, when authentication is off) or the refusal to send.
func caller(b *broker.Broker, r *http.Request) (*auth.Principal, *httpError) {
	if r.Header.Get("Origin") != "" {
		return nil, refuse(http.StatusForbidden, "requests from a web page (with an Origin header) are refused")
	}
	st := b.Auth()
	if !st.Enabled() {
		if !fromLoopback(r) {
			return nil, refuse(http.StatusForbidden, "authentication is off, so the admin API answers clients on loopback only "+
				"(turn authentication on to use it from elsewhere)")
		}
		return nil, nil
	}
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if secret = strings.TrimSpace(secret); !ok || secret == "" {
		return nil, refuse(http.StatusUnauthorized, "this server requires an API key: send Authorization: Bearer <key>")
	}
	p, ok := st.Authenticate(secret)
	switch {
	case !ok:
		return nil, refuse(http.StatusUnauthorized, "unknown or revoked API key")
	case p.Expired(time.Now().UnixMilli()):
		return nil, refuse(http.StatusUnauthorized, "API key %s has expired", p.ID())
	}
	return p, nil
}

// permitted refuses p unless it holds one of kinds on queue.
func permitted(p *auth.Principal, queue string, kinds ...auth.Kind) *httpError {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		if p.Allowed(k, queue) {
			return nil
		}
		names[i] = k.String()
	}
	return refuse(http.StatusForbidden, "API key %s lacks the %s permission on queue %q", p.ID(), strings.Join(names, " or "), queue)
}
