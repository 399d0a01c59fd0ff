// Package keys evaluates keys: the lists of message properties that together name an ordering
// group, a throttle bucket or a deduplication identity (the FIBP `key` type).
//
// A Key is a list of Parts. Evaluating it on a message gives one value per part, or reports that
// the message is missing a part (a header it does not carry, no idempotency key, no such
// attribute). Every user of keys goes through this package, so "missing" means the same thing to
// ordering, deduplication and throttles:
//
//	k := keys.Key{{Kind: keys.Header, Name: "tenant"}, {Kind: keys.FairnessKey}}
//	if err := k.Check(keys.Ordering); err != nil { ... }   // once, when the key is declared
//	group, ok := k.Group(&keys.Subject{Headers: h, FairnessKey: fk})
//	if !ok { ... }                                          // the when-missing policy applies
//
// # The caller's duties
//
//   - Check a key for its use once, when it is declared (CreateQueue, Consume); evaluation assumes
//     a checked key and treats a kind the use forbids as missing.
//   - Evaluate after the on_enqueue hook: the Subject's fairness key and attributes are the hook's.
//   - Values, Group and Identity never keep the Subject or anything it points to.
package keys

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Kind is the kind of one part of a key. The values are the wire's (FIBP key_part_kind), so
// converting between the two is a cast.
type Kind uint8

const (
	// Header reads the header named by the part's Name.
	Header Kind = 0
	// FairnessKey reads the message's fairness key (after on_enqueue); Name is empty.
	FairnessKey Kind = 1
	// Attribute reads the on_enqueue attribute named by the part's Name.
	Attribute Kind = 2
	// IdempotencyKey reads the producer's idempotency key; Name is empty. Deduplication only.
	IdempotencyKey Kind = 3
	// PayloadHash is a SHA-256 of the payload; Name is empty. Deduplication only.
	PayloadHash Kind = 4
	// HeadersHash is a SHA-256 of every header (names sorted, each name and value
	// length-prefixed); Name is empty. Deduplication only.
	HeadersHash Kind = 5
)

var kindNames = [...]string{"header", "fairness_key", "attribute", "idempotency_key", "payload_hash", "headers_hash"}

// String returns the kind's name as the spec spells it; unknown kinds print as "Kind(n)".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// named reports whether parts of kind k carry a Name.
func (k Kind) named() bool { return k == Header || k == Attribute }

// Part is one part of a key.
type Part struct {
	// Kind says which message property the part reads.
	Kind Kind
	// Name is the header or attribute name for Header and Attribute; empty for the other kinds.
	Name string
}

// String formats the part as "kind" or "kind:name".
func (p Part) String() string {
	if p.Kind.named() {
		return p.Kind.String() + ":" + p.Name
	}
	return p.Kind.String()
}

// Key is a list of parts; an empty Key is no key.
type Key []Part

// Use is what a key is declared for; it decides which kinds are allowed.
type Use uint8

const (
	// Ordering keys (a queue's ordering_key) may use Header, FairnessKey and Attribute.
	Ordering Use = iota + 1
	// Dedup keys (a queue's dedup_key) may use every kind.
	Dedup
	// Throttle keys (a throttle declaration's key) may use Header, FairnessKey and Attribute.
	Throttle
)

var useNames = [...]string{Ordering: "ordering", Dedup: "deduplication", Throttle: "throttle"}

// String returns the use's name, as error messages print it.
func (u Use) String() string {
	if int(u) < len(useNames) && useNames[u] != "" {
		return useNames[u]
	}
	return fmt.Sprintf("Use(%d)", uint8(u))
}

// allows reports whether kind k may appear in a key declared for u.
func (u Use) allows(k Kind) bool {
	switch k {
	case Header, FairnessKey, Attribute:
		return true
	case IdempotencyKey, PayloadHash, HeadersHash:
		return u == Dedup
	}
	return false
}

// ErrInvalid is matched (errors.Is) by every error Check returns.
var ErrInvalid = errors.New("invalid key")

// Error is a key Check refused: which part, and why.
type Error struct {
	Use    Use
	Part   int // index of the offending part
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s key part %d: %s", e.Use, e.Part, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// MaxParts bounds a key's parts: every message evaluates its queue's keys, and a consumer's
// throttle keys, part by part (the wire allows 65,535, and checking them for repeats was
// quadratic: seconds of CPU for one Consume).
const MaxParts = 16

// Check reports whether k is a valid key for use u: at most MaxParts parts, every kind known and
// allowed for u, a name on every Header and Attribute part and on no other, and no part repeated.
// An empty key is valid.
func (k Key) Check(u Use) error {
	bad := func(i int, format string, args ...any) error {
		return &Error{Use: u, Part: i, Reason: fmt.Sprintf(format, args...)}
	}
	if len(k) > MaxParts {
		return bad(MaxParts, "a key has at most %d parts (got %d)", MaxParts, len(k))
	}
	for i, p := range k {
		switch {
		case int(p.Kind) >= len(kindNames):
			return bad(i, "unknown kind %d", uint8(p.Kind))
		case !u.allows(p.Kind):
			return bad(i, "kind %s is not allowed in a %s key (only header, fairness_key and attribute)", p.Kind, u)
		case p.Kind.named() && p.Name == "":
			return bad(i, "kind %s needs a name", p.Kind)
		case !p.Kind.named() && p.Name != "":
			return bad(i, "kind %s takes no name (got %q)", p.Kind, p.Name)
		case slices.Contains(k[:i], p):
			return bad(i, "%s appears twice", p)
		}
	}
	return nil
}

// Subject is what a key is evaluated on: a message's properties as the broker decided them.
type Subject struct {
	// Headers are the message's headers; a header is missing when its name is not in the map (a
	// header present with an empty value is present).
	Headers map[string]string
	// FairnessKey is the message's fairness key after on_enqueue and the default; never missing.
	FairnessKey string
	// Attributes are the attributes on_enqueue returned; nil when the queue has no hook or the
	// message is parked (then every Attribute part is missing).
	Attributes map[string]string
	// IdempotencyKey is the producer's idempotency key, when HasIdempotencyKey.
	IdempotencyKey    string
	HasIdempotencyKey bool
	// Payload is the message body (read by PayloadHash only).
	Payload []byte
}

// Values appends one value per part of k, evaluated on s, to dst and returns it; ok is false when
// s is missing a part (dst is then returned unchanged). PayloadHash and HeadersHash give the
// 32-byte SHA-256 as a string.
func (k Key) Values(s *Subject, dst []string) (values []string, ok bool) {
	n := len(dst)
	for _, p := range k {
		v, ok := part(p, s)
		if !ok {
			return dst[:n], false
		}
		dst = append(dst, v)
	}
	return dst, true
}

func part(p Part, s *Subject) (string, bool) {
	switch p.Kind {
	case Header:
		v, ok := s.Headers[p.Name]
		return v, ok
	case FairnessKey:
		return s.FairnessKey, true
	case Attribute:
		v, ok := s.Attributes[p.Name]
		return v, ok
	case IdempotencyKey:
		return s.IdempotencyKey, s.HasIdempotencyKey
	case PayloadHash:
		sum := sha256.Sum256(s.Payload)
		return string(sum[:]), true
	case HeadersHash:
		return headersHash(s.Headers), true
	}
	return "", false
}

// headersHash hashes every header: names sorted, each name and value length-prefixed.
func headersHash(h map[string]string) string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	d := sha256.New()
	var buf []byte
	for _, name := range names {
		buf = appendField(buf[:0], name)
		buf = appendField(buf, h[name])
		d.Write(buf)
	}
	return string(d.Sum(nil))
}

// Group evaluates k on s and encodes the values unambiguously (each one u32-length-prefixed), so
// that two subjects share a group exactly when every part's value is equal. ok is false when s is
// missing a part. The empty key puts every subject in the group "".
func (k Key) Group(s *Subject) (group string, ok bool) {
	buf, ok := k.AppendGroup(nil, s)
	return string(buf), ok
}

// AppendGroup appends Group's encoding of k evaluated on s to dst; when s is missing a part it
// returns dst unchanged and false.
func (k Key) AppendGroup(dst []byte, s *Subject) ([]byte, bool) {
	n := len(dst)
	for _, p := range k {
		v, ok := part(p, s)
		if !ok {
			return dst[:n], false
		}
		dst = appendField(dst, v)
	}
	return dst, true
}

// Identity is a deduplication identity: the first 16 bytes of a SHA-256 of a key's encoded values.
type Identity [16]byte

// Identity evaluates k on s and hashes the encoding Group gives; ok is false when s is missing a
// part. A key of one IdempotencyKey part gives IdempotencyIdentity of that key.
func (k Key) Identity(s *Subject) (id Identity, ok bool) {
	g, ok := k.Group(s)
	if !ok {
		return Identity{}, false
	}
	return identityOf(g), true
}

// IdempotencyIdentity is the identity of a message whose queue has no dedup key: its producer's
// idempotency key alone (the same as a key of one IdempotencyKey part).
func IdempotencyIdentity(idempotencyKey string) Identity {
	var buf [128]byte // most keys fit: no allocation on the enqueue path
	sum := sha256.Sum256(appendField(buf[:0], idempotencyKey))
	var id Identity
	copy(id[:], sum[:])
	return id
}

func identityOf(encoded string) Identity {
	sum := sha256.Sum256([]byte(encoded))
	var id Identity
	copy(id[:], sum[:])
	return id
}

// SplitGroup decodes a Group encoding back into its values, appended to dst; ok is false when g
// is not an encoding Group made.
func SplitGroup(g string, dst []string) (values []string, ok bool) {
	for len(g) > 0 {
		if len(g) < 4 {
			return dst, false
		}
		n := binary.BigEndian.Uint32([]byte(g[:4]))
		if uint64(n) > uint64(len(g)-4) {
			return dst, false
		}
		dst = append(dst, g[4:4+n])
		g = g[4+n:]
	}
	return dst, true
}

// JoinGroup encodes values as Group does, the inverse of SplitGroup: it names a group from its
// values (an operator asking about one throttle bucket).
func JoinGroup(values []string) string {
	var buf []byte
	for _, v := range values {
		buf = appendField(buf, v)
	}
	return string(buf)
}

func appendField(buf []byte, v string) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
	return append(buf, v...)
}
