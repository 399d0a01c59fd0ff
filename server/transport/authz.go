package transport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/session"
)

// Authentication and authorization of a connection (security.md). A connection of a server
// without authentication has a nil principal, which may do everything; otherwise the Handshake's
// key is checked, and every later request checks it again (revocation, expiry and ACL changes
// take effect at the next request) and checks the ACL of what it touches.

// authenticate checks the Handshake's API key; false means Unauthorized was sent and the
// connection must close.
func (c *conn) authenticate(key wire.Optional[string]) bool {
	st := c.s.svc.Auth()
	if !st.Enabled() {
		return true
	}
	gen := st.Gen() // before the lookup: a change after it is seen at the next request
	secret, ok := key.Get()
	if !ok || secret == "" {
		c.sendError(0, fibp.CodeUnauthorized, "this server requires an API key", nil)
		return false
	}
	p, ok := st.Authenticate(secret)
	if !p.Bootstrap() && !st.Fresh() { // a key unknown here may have been created since
		c.sendError(0, fibp.CodeAuthStateStale, staleMessage, nil)
		return false
	}
	if !ok {
		c.sendError(0, fibp.CodeUnauthorized, "unknown or revoked API key", nil)
		return false
	}
	if p.Expired(c.s.opts.Clock().UnixMilli()) {
		c.sendError(0, fibp.CodeUnauthorized, fmt.Sprintf("API key %s has expired", p.ID()), nil)
		return false
	}
	c.auth, c.who, c.whoGen = st, p, gen
	c.log = c.log.With("key", p.ID())
	return true
}

// authorized re-checks the connection's key before a request; false means Unauthorized was
// sent and the connection must close.
func (c *conn) authorized(h fibp.Header) bool {
	if c.who == nil {
		return true
	}
	if msg := c.keyProblem(); msg != "" {
		c.sendError(h.RequestID, fibp.CodeUnauthorized, msg, nil)
		return false
	}
	return true
}

// keyProblem looks the key up again when the store changed and says why it no longer
// authenticates ("" when it does). Subscriptions the key may no longer consume from end with
// Forbidden. A revoked key stays revoked for every later call.
func (c *conn) keyProblem() string {
	if g := c.auth.Gen(); g != c.whoGen {
		p, ok := c.auth.Lookup(c.who.ID())
		if !ok {
			return fmt.Sprintf("API key %s was revoked", c.who.ID())
		}
		c.who, c.whoGen = p, g
		for id, ref := range c.subs {
			if !p.Allowed(auth.Consume, ref.queue) && c.endSubscription(id, ref) {
				c.forbidden(id, auth.Consume, ref.queue)
			}
		}
	}
	if c.who.Expires() && c.who.Expired(c.s.opts.Clock().UnixMilli()) {
		return fmt.Sprintf("API key %s has expired", c.who.ID())
	}
	return ""
}

// staleMessage is AuthStateStale's reason.
const staleMessage = "this node cannot confirm its API keys and ACLs are current (it has not heard from the cluster's meta leader within auth.max_staleness_ms); try another node"

// stale refuses a request with AuthStateStale while this node of a cluster cannot confirm its
// copy of the keys and ACLs is current (the bootstrap key, from the node's own configuration,
// excepted); true means it was answered. The connection's subscriptions end with AuthStateStale
// too (a consumer moves to another node). Ping, Pong, Disconnect and CancelConsume serve no
// data and pass; a Credit is not answered (its subscription's end is the answer).
func (c *conn) stale(h fibp.Header) bool {
	if c.who == nil || c.who.Bootstrap() {
		return false
	}
	switch h.Opcode {
	case fibp.OpPing, fibp.OpPong, fibp.OpDisconnect, fibp.OpCancelConsume:
		return false
	}
	if c.auth.Fresh() {
		return false
	}
	c.endStale()
	if h.Opcode != fibp.OpCredit {
		c.sendError(h.RequestID, fibp.CodeAuthStateStale, staleMessage, nil)
	}
	return true
}

// endStale ends every subscription with AuthStateStale.
func (c *conn) endStale() {
	for id, ref := range c.subs {
		if c.endSubscription(id, ref) {
			c.sendError(id, fibp.CodeAuthStateStale, staleMessage, nil)
		}
	}
}

// endSubscription ends a subscription and forgets it; it reports false when its Consume had
// failed (answered already, its memory given back: consumeaside.go). It waits for a Subscribe
// still running beside the reader.
func (c *conn) endSubscription(id uint32, ref *subRef) bool {
	delete(c.subs, id)
	if !ref.subscribed() {
		return false
	}
	ref.sub.Unsubscribe()
	c.acct.Release(subscriptionMemory)
	return true
}

// A connection's key changes (revocation, ACL, expiry) must reach it even when it sends no
// request, as a consumer need not: keepalive wakes the reader (a read deadline in the past), which
// then checks the key as before a request.

// keyWatch returns what keepalive waits on: the store's next change (nil without
// authentication) and whether every tick checks the key: it expires, or this node of a cluster
// may find its copy of the keys stale (its subscriptions then end with AuthStateStale).
func (c *conn) keyWatch() (<-chan struct{}, bool) {
	if c.who == nil {
		return nil, false
	}
	return c.auth.Changed(), c.who.Expires() || (c.auth.MayGoStale() && !c.who.Bootstrap())
}

// wakeReader makes the reader check the key, and forget ended subscriptions, now.
func (c *conn) wakeReader() {
	c.recheck.Store(true)
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	if !c.skipping {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// skipRefused discards the body of a refused frame (FrameReader.Skip) without a wake in the
// middle: a failed Skip may lose the header that the answer needs, so the reader checks the key
// once the body is gone instead.
func (c *conn) skipRefused() ([]byte, error) {
	c.wakeMu.Lock()
	c.skipping = true
	_ = c.nc.SetReadDeadline(time.Time{}) // a wake that came just before
	if c.disconnecting.Load() {
		_ = c.nc.SetReadDeadline(time.Now()) // a shutdown's wake stays
	}
	c.wakeMu.Unlock()
	head, err := c.fr.Skip(fibp.HeaderSize)
	c.wakeMu.Lock()
	c.skipping = false
	c.wakeMu.Unlock()
	if err == nil && c.recheck.Load() {
		c.recheckKey()
	}
	return head, err
}

// recheckKey runs on the reader after wakeReader. It forgets the subscriptions the broker ended
// (dropEnded), and a key that no longer authenticates ends every subscription with
// Unauthorized; the connection itself hears of it at its next request, as before (security.md:
// "at their next request").
func (c *conn) recheckKey() {
	c.recheck.Store(false) // before the deadline is cleared: a wake meanwhile is not lost
	_ = c.nc.SetReadDeadline(time.Time{})
	if c.disconnecting.Load() {
		_ = c.nc.SetReadDeadline(time.Now()) // a shutdown's wake must not be cleared
	}
	c.dropEnded()
	if c.who == nil {
		return
	}
	if msg := c.keyProblem(); msg != "" {
		for id, ref := range c.subs {
			if c.endSubscription(id, ref) {
				c.sendError(id, fibp.CodeUnauthorized, msg, nil)
			}
		}
		return
	}
	if len(c.subs) > 0 && !c.who.Bootstrap() && !c.auth.Fresh() {
		c.endStale()
	}
}

// forbidden answers a request-level ACL denial of kind on name (a queue, or a throttle).
func (c *conn) forbidden(requestID uint32, kind auth.Kind, name string) {
	what := "queue"
	if !kind.OnQueues() {
		what = "throttle"
	}
	c.sendError(requestID, fibp.CodeForbidden, fmt.Sprintf("API key %s has no %s permission on %s %q", c.who.ID(), kind, what, name), nil)
}

// forbiddenAll answers a batch whose every item was denied kind on its queue: one Forbidden
// Error frame naming the key, the permission and the queues (the first maxNamed of them).
func forbiddenAll[T any](c *conn, requestID uint32, kind auth.Kind, items []T, queue func(*T) string) {
	const maxNamed = 5
	var names []string
	more := 0
	for i := range items {
		q := strconv.Quote(queue(&items[i]))
		switch {
		case slices.Contains(names, q):
		case len(names) < maxNamed:
			names = append(names, q)
		default:
			more++ // may count a queue twice: only "and more" is said
		}
	}
	what := "queue " + names[0]
	if len(names) > 1 {
		what = "queues " + strings.Join(names, ", ")
	}
	if more > 0 {
		what += " and others"
	}
	c.sendError(requestID, fibp.CodeForbidden, fmt.Sprintf("API key %s has no %s permission on %s", c.who.ID(), kind, what), nil)
}

// permitAdmin checks an admin request against the key; false means it was answered.
func (c *conn) permitAdmin(h fibp.Header, body []byte) bool {
	need, err := session.AdminNeed(h.Opcode, body)
	switch {
	case err != nil:
		c.sendError(h.RequestID, fibp.CodeInvalidFrame, err.Error(), nil)
		return false
	case need.Permits(c.who):
		return true
	case need.Superadmin:
		c.sendError(h.RequestID, fibp.CodeForbidden, fmt.Sprintf("%v needs a superadmin key", h.Opcode), nil)
	default:
		c.forbidden(h.RequestID, need.Kind, need.Queue)
	}
	return false
}

// screen keeps the items of a batch whose queue the key may use for kind. denied is nil when
// every item is kept (then kept is items); otherwise denied[i] marks the items left out.
func screen[T any](who *auth.Principal, kind auth.Kind, items []T, queue func(*T) string) (kept []T, denied []bool) {
	if who.Superadmin() {
		return items, nil
	}
	last, lastOK := "", false
	for i := range items {
		q := queue(&items[i])
		if i == 0 || q != last {
			last, lastOK = q, who.Allowed(kind, q)
		}
		if lastOK && denied == nil {
			continue
		}
		if denied == nil {
			denied = make([]bool, len(items))
			kept = append(make([]T, 0, len(items)), items[:i]...)
		}
		if lastOK {
			kept = append(kept, items[i])
		} else {
			denied[i] = true
		}
	}
	if denied == nil {
		return items, nil
	}
	return kept, denied
}

// unscreen puts the denied items back into a batch's results as forbidden.
func unscreen[R any](denied []bool, rs []R, forbidden R) []R {
	if denied == nil {
		return rs
	}
	out := make([]R, len(denied))
	j := 0
	for i, d := range denied {
		switch {
		case d:
			out[i] = forbidden
		case j < len(rs):
			out[i] = rs[j]
			j++
		}
	}
	return out
}

// allDenied reports whether screening left nothing to send to the broker.
func allDenied[T any](kept []T, denied []bool) bool { return denied != nil && len(kept) == 0 }
