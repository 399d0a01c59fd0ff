// Package auth holds Rift identities and their permission rules.
//
// An identity has a name, a token (kept only as its SHA-256 hash and compared in constant time),
// publish and subscribe subject patterns, and a control flag. The rules, from the Rift spec:
//
//   - Publishing needs a publish pattern matching the subject.
//   - Subscribing needs a subscribe pattern that contains the whole subscription pattern:
//     game.* does not authorize game.> or >, and game.> does not authorize bare game.
//   - Anything overlapping rift.control (bare rift.control, its children, or broad patterns such as
//     >) also needs control = true, on top of the ACL.
//   - Nobody publishes to rift.events or its children: the server owns them.
//   - An explicit reply subject must be a literal _INBOX.<...> subject matched by one of the
//     identity's subscribe patterns.
//   - Durable consumer names are scoped to the identity (see stream.Store): Owner returns the scope.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/filamq/fila/server/rift/subject"
)

// Reserved subject namespaces.
const (
	ControlSubject = "rift.control"
	EventsSubject  = "rift.events"
	InboxPrefix    = "_INBOX."
)

// ErrDenied is wrapped by every permission failure.
var ErrDenied = errors.New("permission denied")

// DeniedError says which operation on which subject was refused and why.
type DeniedError struct {
	Identity, Op, Subject, Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("permission denied: %s may not %s %q: %s", e.Identity, e.Op, e.Subject, e.Reason)
}

func (e *DeniedError) Unwrap() error { return ErrDenied }

// Config describes one identity as configured. Exactly one of Token and TokenSHA256 (hex) is set.
type Config struct {
	Name        string   `yaml:"name"`
	Token       string   `yaml:"token"`
	TokenSHA256 string   `yaml:"token_sha256"`
	Publish     []string `yaml:"publish"`
	Subscribe   []string `yaml:"subscribe"`
	Control     bool     `yaml:"control"`
}

// Identity is an authenticated principal. It is immutable and safe for concurrent use.
type Identity struct {
	Name      string
	Publish   []string
	Subscribe []string
	Control   bool
	hash      [sha256.Size]byte
}

// New returns an identity with the given rights and no token (for in-process components).
func New(name string, publish, subscribe []string, control bool) (*Identity, error) {
	id := &Identity{Name: name, Publish: publish, Subscribe: subscribe, Control: control}
	if err := subject.ValidName(name); err != nil {
		return nil, fmt.Errorf("identity %q: %w", name, err)
	}
	for _, p := range append(append([]string(nil), publish...), subscribe...) {
		if err := subject.ValidPattern(p); err != nil {
			return nil, fmt.Errorf("identity %s: pattern %q: %w", name, p, err)
		}
	}
	return id, nil
}

// Registry holds the configured identities.
type Registry struct {
	ids    []*Identity
	byName map[string]*Identity
}

// NewRegistry validates the configured identities and hashes their tokens.
func NewRegistry(cfgs []Config) (*Registry, error) {
	r := &Registry{byName: map[string]*Identity{}}
	var errs []error
	seen := map[[sha256.Size]byte]string{}
	for _, c := range cfgs {
		id, err := New(c.Name, c.Publish, c.Subscribe, c.Control)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case (c.Token == "") == (c.TokenSHA256 == ""):
			errs = append(errs, fmt.Errorf("identity %s: give exactly one of token and token_sha256", c.Name))
			continue
		case c.Token != "":
			id.hash = sha256.Sum256([]byte(c.Token))
		default:
			b, err := hex.DecodeString(strings.TrimSpace(c.TokenSHA256))
			if err != nil || len(b) != sha256.Size {
				errs = append(errs, fmt.Errorf("identity %s: token_sha256 must be 64 hexadecimal digits", c.Name))
				continue
			}
			copy(id.hash[:], b)
		}
		if other, dup := seen[id.hash]; dup {
			errs = append(errs, fmt.Errorf("identities %s and %s share a token", other, c.Name))
		}
		if _, dup := r.byName[c.Name]; dup {
			errs = append(errs, fmt.Errorf("identity %s: defined twice", c.Name))
		}
		seen[id.hash] = c.Name
		r.ids = append(r.ids, id)
		r.byName[c.Name] = id
	}
	return r, errors.Join(errs...)
}

// Authenticate returns the identity whose token is token. Every identity's hash is compared in
// constant time, so the time taken does not reveal which one (if any) matched.
func (r *Registry) Authenticate(token string) (*Identity, bool) {
	if token == "" {
		return nil, false
	}
	h := sha256.Sum256([]byte(token))
	var found *Identity
	for _, id := range r.ids {
		if subtle.ConstantTimeCompare(h[:], id.hash[:]) == 1 {
			found = id
		}
	}
	return found, found != nil
}

// Lookup returns the identity named name (for plugins configured with an identity name).
func (r *Registry) Lookup(name string) (*Identity, bool) {
	id, ok := r.byName[name]
	return id, ok
}

// Len returns the number of identities.
func (r *Registry) Len() int { return len(r.ids) }

func (id *Identity) deny(op, subj, reason string) error {
	return &DeniedError{Identity: id.Name, Op: op, Subject: subj, Reason: reason}
}

// CheckPublish reports whether id may publish (or request, or stream-publish) to the literal
// subject s.
func (id *Identity) CheckPublish(s string) error {
	if s == EventsSubject || strings.HasPrefix(s, EventsSubject+".") {
		return id.deny("publish to", s, "rift.events is owned by the server")
	}
	if !matchesAny(id.Publish, s) {
		return id.deny("publish to", s, "no publish pattern matches")
	}
	if !id.Control && (s == ControlSubject || strings.HasPrefix(s, ControlSubject+".")) {
		return id.deny("publish to", s, "rift.control needs a control identity")
	}
	return nil
}

// CheckSubscribe reports whether id may subscribe to (or read a stream through) pattern p.
func (id *Identity) CheckSubscribe(p string) error {
	contained := false
	for _, allowed := range id.Subscribe {
		if subject.Contains(allowed, p) {
			contained = true
			break
		}
	}
	if !contained {
		return id.deny("subscribe to", p, "not contained in a subscribe pattern")
	}
	if !id.Control && (subject.Overlaps(p, ControlSubject) || subject.Overlaps(p, ControlSubject+".>")) {
		return id.deny("subscribe to", p, "overlaps rift.control, which needs a control identity")
	}
	return nil
}

// CheckReply reports whether id may name r as the explicit reply subject of a publication: r must
// be empty, or a literal _INBOX.<...> subject matched by one of id's subscribe patterns.
func (id *Identity) CheckReply(r string) error {
	if r == "" {
		return nil
	}
	if !strings.HasPrefix(r, InboxPrefix) || subject.Valid(r) != nil {
		return id.deny("use reply subject", r, "reply subjects must be literal _INBOX.<...> subjects")
	}
	if !matchesAny(id.Subscribe, r) {
		return id.deny("use reply subject", r, "no subscribe pattern covers it")
	}
	return nil
}

func matchesAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if subject.Match(p, s) {
			return true
		}
	}
	return false
}
