package broker

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/auth"
)

// API keys and ACLs are meta state: the leader decides (the key's ID, secret and creation time)
// and proposes a command that carries only the secret's hash; the meta state machine applies it
// to the auth.Store, on every replica and on every restart alike.

// Auth returns the API keys and ACLs. Callers read it; it changes only through the methods below
// (and the bootstrap key, set when the broker opens).
func (b *Broker) Auth() *auth.Store { return b.meta.keys }

// minBootstrapSecret is the shortest bootstrap secret accepted: an operator's secret should carry
// as much randomness as the generated ones do.
const minBootstrapSecret = 32

func setBootstrap(s *auth.Store, secret string) error {
	secret = strings.TrimSpace(secret)
	if len(secret) < minBootstrapSecret {
		return fmt.Errorf("broker: the bootstrap API key must be at least %d characters (it has %d)", minBootstrapSecret, len(secret))
	}
	s.SetBootstrap(secret)
	return nil
}

// CreateAPIKey creates a key named name, expiring at expiresAtMs (Unix ms, 0 = never).
func (b *Broker) CreateAPIKey(name string, expiresAtMs uint64, superadmin bool) (APIKeyCreated, *Error) {
	now := b.clock().UnixMilli()
	switch {
	case name == "" || len(name) > 255 || !utf8.ValidString(name) || strings.ContainsFunc(name, auth.Unsafe):
		return APIKeyCreated{}, errorf(CodeInvalidConfigValue, "key name %q must be 1 to 255 bytes of UTF-8 without control characters", name)
	case expiresAtMs != 0 && int64(expiresAtMs) <= now:
		return APIKeyCreated{}, errorf(CodeInvalidConfigValue, "expires_at %d is not in the future", expiresAtMs)
	}
	id, secret := auth.NewSecret()
	h := auth.HashOf(secret)
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	cmd := &queuelog.PutAPIKey{ID: id, Name: name, SecretHash: h[:], CreatedAt: uint64(now), ExpiresAt: expiresAtMs, Superadmin: superadmin}
	if err := b.proposeMeta(cmd); err != nil {
		return APIKeyCreated{}, errorf(CodeStorageError, "%v", err)
	}
	return APIKeyCreated{ID: id, Secret: secret, Superadmin: superadmin}, nil
}

// keyExists checks that id names a stored key (the bootstrap key is configuration, not one).
func (b *Broker) keyExists(id string) *Error {
	if id == auth.BootstrapID {
		return errorf(CodeInvalidConfigValue, "the bootstrap key comes from the server's configuration; change it there")
	}
	if _, ok := b.meta.keys.Get(id); !ok {
		return errorf(CodeAPIKeyNotFound, "API key %q does not exist", id)
	}
	return nil
}

// RevokeAPIKey deletes a key; connections using it are refused at their next request.
func (b *Broker) RevokeAPIKey(id string) *Error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if e := b.keyExists(id); e != nil {
		return e
	}
	if err := b.proposeMeta(&queuelog.RevokeAPIKey{ID: id}); err != nil {
		return errorf(CodeStorageError, "%v", err)
	}
	return nil
}

// ListAPIKeys returns every stored key (without secrets, which are never kept), by ID.
func (b *Broker) ListAPIKeys() []auth.Record { return b.meta.keys.List() }

// SetACL replaces a key's permissions.
func (b *Broker) SetACL(id string, acl []auth.Permission) *Error {
	cmd := &queuelog.SetACL{ID: id, Permissions: make([]queuelog.ACLPermission, len(acl))}
	for i, p := range acl {
		if err := auth.CheckPattern(p.Pattern); err != nil {
			return errorf(CodeInvalidConfigValue, "%v", err)
		}
		cmd.Permissions[i] = queuelog.ACLPermission{Kind: p.Kind.String(), Pattern: p.Pattern}
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if e := b.keyExists(id); e != nil {
		return e
	}
	if err := b.proposeMeta(cmd); err != nil {
		return errorf(CodeStorageError, "%v", err)
	}
	return nil
}

// GetACL returns a key's record with its permissions.
func (b *Broker) GetACL(id string) (auth.Record, *Error) {
	r, ok := b.meta.keys.Get(id)
	if !ok {
		return auth.Record{}, errorf(CodeAPIKeyNotFound, "API key %q does not exist", id)
	}
	return r, nil
}

// applyKey applies a committed key command to the store.
func (m *metaFSM) applyKey(f queuelog.Frame) error {
	switch c := f.(type) {
	case *queuelog.PutAPIKey:
		r := auth.Record{ID: c.ID, Name: c.Name, CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt, Superadmin: c.Superadmin}
		if len(c.SecretHash) != len(r.Hash) {
			return fmt.Errorf("meta: API key %q: a %d-byte hash", c.ID, len(c.SecretHash))
		}
		copy(r.Hash[:], c.SecretHash)
		m.keys.Put(r)
	case *queuelog.RevokeAPIKey:
		m.keys.Revoke(c.ID)
	case *queuelog.SetACL:
		acl, err := permissions(c.Permissions, func(p queuelog.ACLPermission) (string, string) { return p.Kind, p.Pattern })
		if err != nil {
			return fmt.Errorf("meta: ACL of %q: %w", c.ID, err)
		}
		m.keys.SetACL(c.ID, acl)
	}
	return nil
}

// permissions parses logged permissions.
func permissions[T any](ps []T, fields func(T) (kind, pattern string)) ([]auth.Permission, error) {
	out := make([]auth.Permission, len(ps))
	for i, p := range ps {
		kind, pattern := fields(p)
		k, err := auth.ParseKind(kind)
		if err != nil {
			return nil, err
		}
		out[i] = auth.Permission{Kind: k, Pattern: pattern}
	}
	return out, nil
}

func keySnapshot(r *auth.Record) *queuelog.SnapshotAPIKey {
	s := &queuelog.SnapshotAPIKey{ID: r.ID, Name: r.Name, SecretHash: r.Hash[:], CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, Superadmin: r.Superadmin}
	for _, p := range r.ACL {
		s.Permissions = append(s.Permissions, queuelog.SnapshotPermission{Kind: p.Kind.String(), Pattern: p.Pattern})
	}
	return s
}

func snapshotKey(c *queuelog.SnapshotAPIKey) (auth.Record, error) {
	r := auth.Record{ID: c.ID, Name: c.Name, CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt, Superadmin: c.Superadmin}
	if len(c.SecretHash) != len(r.Hash) {
		return r, fmt.Errorf("API key %q: a %d-byte hash", c.ID, len(c.SecretHash))
	}
	copy(r.Hash[:], c.SecretHash)
	acl, err := permissions(c.Permissions, func(p queuelog.SnapshotPermission) (string, string) { return p.Kind, p.Pattern })
	r.ACL = acl
	return r, err
}
