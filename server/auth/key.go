package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
)

// SecretBytes is the randomness of a generated secret: 256 bits.
const SecretBytes = 32

// secretPrefix starts every generated secret, so that one is recognisable in a leaked file.
const secretPrefix = "fila_"

// Hash is the SHA-256 of a secret: all the broker keeps of it.
type Hash [sha256.Size]byte

// HashOf hashes a secret.
func HashOf(secret string) Hash { return sha256.Sum256([]byte(secret)) }

// Equal compares two hashes in constant time.
func (h Hash) Equal(o Hash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }

// NewSecret returns a new secret (SecretBytes of crypto/rand, base64url) and a new key ID.
func NewSecret() (id, secret string) {
	b := make([]byte, SecretBytes+8)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return "key_" + hex.EncodeToString(b[SecretBytes:]), secretPrefix + base64.RawURLEncoding.EncodeToString(b[:SecretBytes])
}

// Record is one API key as the meta group keeps it.
type Record struct {
	ID         string
	Name       string
	Hash       Hash
	CreatedAt  uint64 // Unix ms
	ExpiresAt  uint64 // Unix ms; 0 = never
	Superadmin bool
	ACL        []Permission
}

// Expired reports whether the key is past its expiry at nowMs.
func (r *Record) Expired(nowMs int64) bool {
	return r.ExpiresAt != 0 && nowMs >= int64(r.ExpiresAt)
}
