package meta

import (
	"fmt"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/auth"
)

// API keys and ACLs are meta state: the leader decides (the key's ID, secret and creation time)
// and proposes a command that carries only the secret's hash; applying it changes the
// auth.Store, on every node and on every restart alike.

// applyKey applies a committed key command to the store.
func applyKey(keys *auth.Store, f queuelog.Frame) error {
	switch c := f.(type) {
	case *queuelog.PutAPIKey:
		r := auth.Record{ID: c.ID, Name: c.Name, CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt, Superadmin: c.Superadmin}
		if len(c.SecretHash) != len(r.Hash) {
			return fmt.Errorf("meta: API key %q: a %d-byte hash", c.ID, len(c.SecretHash))
		}
		copy(r.Hash[:], c.SecretHash)
		keys.Put(r)
	case *queuelog.RevokeAPIKey:
		keys.Revoke(c.ID)
	case *queuelog.SetACL:
		acl, err := permissions(c.Permissions, func(p queuelog.ACLPermission) (string, string) { return p.Kind, p.Pattern })
		if err != nil {
			return fmt.Errorf("meta: ACL of %q: %w", c.ID, err)
		}
		keys.SetACL(c.ID, acl)
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
