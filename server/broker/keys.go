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
func (b *Broker) Auth() *auth.Store { return b.catalog().Keys() }

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
	if _, ok := b.catalog().Keys().Get(id); !ok {
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
func (b *Broker) ListAPIKeys() []auth.Record { return b.catalog().Keys().List() }

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
	r, ok := b.catalog().Keys().Get(id)
	if !ok {
		return auth.Record{}, errorf(CodeAPIKeyNotFound, "API key %q does not exist", id)
	}
	return r, nil
}
