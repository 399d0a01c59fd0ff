package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// The HTTP admin API's callers (docs/admin-api.md). With authentication on, every request needs
// an API key, checked as a FIBP Handshake's key is (unknown, revoked or expired keys refused) on
// every request, then its ACL as FIBP checks it. The key comes in Authorization: Bearer <key>
// (the CLI, scripts), or in the console's session cookie, set by POST /api/v1/session: the
// cookie holds the key itself, so a key revoked is refused at the next request whichever way it
// comes. With authentication off, clients on loopback only, which may do everything.
//
// Browsers send cookies by themselves, so a page of another site must not be able to make one
// send a request the user did not mean: every request from another origin is refused (its
// Origin header, or Sec-Fetch-Site, says so; the cookies are SameSite=Strict besides), and a
// request authenticated by the cookie that changes something must carry X-CSRF-Token equal to
// the fila_csrf cookie, which only a page of the API's own origin can read. With authentication
// off, a browser's request must also name a loopback host: a page of another name resolved to
// 127.0.0.1 (DNS rebinding) is then same-origin, but its Host is that name.

// The session cookies and the CSRF header.
const (
	sessionCookie = "fila_session" // the API key, base64url; HttpOnly
	csrfCookie    = "fila_csrf"    // random; read by the console's script and sent back in csrfHeader
	csrfHeader    = "X-CSRF-Token"
)

// caller authenticates r's sender against b's keys for a backup (backup.go), by its bearer key
// only. It answers the key (nil, the anonymous caller who may do everything, when authentication
// is off) or the refusal to send.
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
	secret, ok := bearer(r)
	if !ok {
		return nil, refuse(http.StatusUnauthorized, "this server requires an API key: send Authorization: Bearer <key>")
	}
	return authenticate(st, secret)
}

// apiCaller authenticates an admin API request (see above): the key (nil when authentication
// is off) or the refusal to send.
func apiCaller(b *broker.Broker, r *http.Request) (*auth.Principal, *httpError) {
	if herr := sameOrigin(r); herr != nil {
		return nil, herr
	}
	st := b.Auth()
	if !st.Enabled() {
		return nil, loopbackOnly(r)
	}
	if r.Header.Get("Authorization") != "" {
		secret, ok := bearer(r)
		if !ok {
			return nil, refuse(http.StatusUnauthorized, "the Authorization header must be Bearer <key>")
		}
		return authenticate(st, secret)
	}
	secret, ok := sessionKey(r)
	if !ok {
		return nil, refuse(http.StatusUnauthorized, "this server requires an API key: send Authorization: Bearer <key>, "+
			"or log in (POST /api/v1/session)")
	}
	if changes(r.Method) {
		if herr := checkCSRF(r); herr != nil {
			return nil, herr
		}
	}
	return authenticate(st, secret)
}

// bearer is the key of the Authorization header.
func bearer(r *http.Request) (string, bool) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	secret = strings.TrimSpace(secret)
	return secret, ok && secret != ""
}

// authenticate checks secret as a Handshake does.
func authenticate(st *auth.Store, secret string) (*auth.Principal, *httpError) {
	p, ok := st.Authenticate(secret)
	switch {
	case !p.Bootstrap() && !st.Fresh(): // a node of a cluster cut off from the meta leader (docs/cluster.md)
		return nil, refuse(http.StatusServiceUnavailable, "this node cannot confirm its API keys and ACLs are current "+
			"(it has not heard from the cluster's meta leader within auth.max_staleness_ms); try another node")
	case !ok:
		return nil, refuse(http.StatusUnauthorized, "unknown or revoked API key")
	case p.Expired(time.Now().UnixMilli()):
		return nil, refuse(http.StatusUnauthorized, "API key %s has expired", p.ID())
	}
	return p, nil
}

// loopbackOnly refuses, with authentication off, a client that is not on loopback, and a
// browser's request that names a host other than a loopback one.
func loopbackOnly(r *http.Request) *httpError {
	if !fromLoopback(r) {
		return refuse(http.StatusForbidden, "authentication is off, so the admin API answers clients on loopback only "+
			"(turn authentication on to use it from elsewhere)")
	}
	if fromBrowser(r) && !loopbackHost(r.Host) {
		return refuse(http.StatusForbidden, "authentication is off, so a browser must open the console at a loopback address "+
			"(127.0.0.1, [::1] or localhost), not %q", r.Host)
	}
	return nil
}

// fromBrowser reports whether r carries the headers a browser adds to a page's requests.
func fromBrowser(r *http.Request) bool {
	return r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Cookie") != ""
}

// loopbackHost reports whether a Host header names a loopback address or localhost.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin refuses a request a page of another origin made: its Origin names another host
// (scheme aside: a proxy in front may end TLS), or Sec-Fetch-Site says it is not same-origin
// ("none", a URL typed or bookmarked, may only read).
func sameOrigin(r *http.Request) *httpError {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return refuse(http.StatusForbidden, "requests from another origin (Origin: %q) are refused", o)
		}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin":
	case "none":
		if changes(r.Method) {
			return refuse(http.StatusForbidden, "a change must come from the console's own pages (Sec-Fetch-Site: none)")
		}
	default:
		return refuse(http.StatusForbidden, "requests from another site or origin (Sec-Fetch-Site: %s) are refused", site)
	}
	return nil
}

// changes reports whether method is one that may change something.
func changes(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// checkCSRF requires X-CSRF-Token equal to the fila_csrf cookie (compared in constant time).
func checkCSRF(r *http.Request) *httpError {
	c, err := r.Cookie(csrfCookie)
	h := r.Header.Get(csrfHeader)
	if err != nil || c.Value == "" || h == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(h)) != 1 {
		return refuse(http.StatusForbidden, "a change made with the console's session must carry the %s header equal to the %s cookie",
			csrfHeader, csrfCookie)
	}
	return nil
}

// sessionKey is the key the session cookie holds.
func sessionKey(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	key, err := base64.RawURLEncoding.DecodeString(c.Value)
	return string(key), err == nil && len(key) > 0
}

// newCSRFToken is a fresh random token (256 bits, base64url).
func newCSRFToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionCookies are the cookies of a session holding key (an empty key clears them).
func sessionCookies(r *http.Request, key string) []*http.Cookie {
	maxAge, csrf := 0, ""
	if key == "" {
		maxAge = -1
	} else {
		csrf = newCSRFToken()
	}
	return []*http.Cookie{
		{Name: sessionCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(key)), Path: "/", MaxAge: maxAge,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil},
		{Name: csrfCookie, Value: csrf, Path: "/", MaxAge: maxAge, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil},
	}
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

// superadmin refuses p unless it is a superadmin key, as FIBP's key, ACL and cluster requests do.
func superadmin(p *auth.Principal, what string) *httpError {
	if p.Superadmin() {
		return nil
	}
	return refuse(http.StatusForbidden, "API key %s is not a superadmin key; %s needs one", p.ID(), what)
}
