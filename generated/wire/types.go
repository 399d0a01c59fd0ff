package wire

import "encoding/hex"

// UUID is a 16-byte identifier in RFC 9562 byte order, as it travels on the wire.
type UUID [16]byte

// String renders u in the canonical 8-4-4-4-12 hexadecimal form.
func (u UUID) String() string {
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

// IsZero reports whether every byte of u is zero.
func (u UUID) IsZero() bool { return u == UUID{} }

// ParseUUID parses the canonical 36-character form (hyphens optional, 32 hex digits).
func ParseUUID(s string) (UUID, error) {
	var u UUID
	var digits [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' {
			continue
		}
		if n == len(digits) {
			return u, errBadUUID
		}
		digits[n] = c
		n++
	}
	if n != len(digits) {
		return u, errBadUUID
	}
	if _, err := hex.Decode(u[:], digits[:]); err != nil {
		return u, errBadUUID
	}
	return u, nil
}

var errBadUUID = errorString("wire: malformed UUID")

type errorString string

func (e errorString) Error() string { return string(e) }

// Optional is the Go form of optional<T>: [u8 present][T if present].
type Optional[T any] struct {
	Value   T
	Present bool
}

// Some returns a present Optional holding v.
func Some[T any](v T) Optional[T] { return Optional[T]{Value: v, Present: true} }

// Get returns the value and whether it is present.
func (o Optional[T]) Get() (T, bool) { return o.Value, o.Present }

// Or returns the value when present and def otherwise.
func (o Optional[T]) Or(def T) T {
	if o.Present {
		return o.Value
	}
	return def
}
