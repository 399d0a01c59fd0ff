// Package subject holds Rift's subject rules: validation of literal subjects and patterns, matching,
// pattern containment and overlap (for permissions), and Index, a token trie that finds the
// subscriptions matching a subject without scanning them all.
//
// Syntax: tokens separated by '.', each non-empty, with no whitespace or control characters. In a
// pattern, '*' matches exactly one token and '>' (only as the last token) one or more remaining
// tokens; both are only valid as whole tokens. A literal subject has no wildcards.
package subject

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest subject or pattern in bytes.
const MaxLen = 1024

// Errors returned by Valid and ValidPattern.
var (
	ErrEmpty    = errors.New("subject: empty")
	ErrTooLong  = errors.New("subject: longer than 1024 bytes")
	ErrToken    = errors.New("subject: empty token or whitespace/control character")
	ErrWildcard = errors.New("subject: wildcard not allowed here")
	ErrGtLast   = errors.New("subject: '>' must be the last token")
	ErrPartial  = errors.New("subject: '*' and '>' must be whole tokens")
)

// Valid reports whether s is a valid literal subject (no wildcards).
func Valid(s string) error { return check(s, false) }

// ValidPattern reports whether s is a valid subscription pattern.
func ValidPattern(s string) error { return check(s, true) }

func check(s string, wildcards bool) error {
	if s == "" {
		return ErrEmpty
	}
	if len(s) > MaxLen {
		return ErrTooLong
	}
	for rest := s; ; {
		tok, more := cut(rest)
		if err := checkToken(tok, wildcards, more != ""); err != nil {
			return err
		}
		if more == "" {
			if strings.HasSuffix(rest, ".") {
				return ErrToken
			}
			return nil
		}
		rest = more
	}
}

func checkToken(tok string, wildcards, notLast bool) error {
	switch tok {
	case "":
		return ErrToken
	case "*", ">":
		if !wildcards {
			return ErrWildcard
		}
		if tok == ">" && notLast {
			return ErrGtLast
		}
		return nil
	}
	for i := 0; i < len(tok); {
		c := tok[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == 0x7f {
				return ErrToken
			}
			if c == '*' || c == '>' {
				if wildcards {
					return ErrPartial
				}
				return ErrWildcard
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(tok[i:])
		if r == utf8.RuneError && n <= 1 || unicode.IsSpace(r) || unicode.IsControl(r) {
			return ErrToken
		}
		i += n
	}
	return nil
}

// cut splits s at its first '.': the first token and the remainder ("" when none).
func cut(s string) (tok, rest string) {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// Match reports whether the literal subject s matches pattern p. Both are assumed valid.
func Match(p, s string) bool {
	for {
		pt, prest := cut(p)
		st, srest := cut(s)
		switch {
		case pt == ">":
			return true // s has at least the current token
		case pt != "*" && pt != st:
			return false
		}
		if prest == "" || srest == "" {
			return prest == "" && srest == ""
		}
		p, s = prest, srest
	}
}

// Contains reports whether every subject matched by pattern inner is also matched by pattern
// outer: game.* contains game.x but not game.> or game.
func Contains(outer, inner string) bool {
	for {
		ot, orest := cut(outer)
		it, irest := cut(inner)
		switch {
		case ot == ">":
			return true
		case it == ">":
			return false
		case ot == "*":
		case it == "*" || ot != it:
			return false
		}
		if orest == "" || irest == "" {
			return orest == "" && irest == ""
		}
		outer, inner = orest, irest
	}
}

// Overlaps reports whether some subject matches both patterns a and b.
func Overlaps(a, b string) bool {
	for {
		at, arest := cut(a)
		bt, brest := cut(b)
		switch {
		case at == ">" || bt == ">":
			return true
		case at != "*" && bt != "*" && at != bt:
			return false
		}
		if arest == "" || brest == "" {
			return arest == "" && brest == ""
		}
		a, b = arest, brest
	}
}

// ErrName reports an invalid stream, consumer or identity name.
var ErrName = errors.New("name: must be 1-96 ASCII letters, digits, underscores, dashes or dots")

// ValidName reports whether s is a valid stream, consumer or identity name: 1-96 ASCII letters,
// digits, underscores, dashes or dots.
func ValidName(s string) error {
	if len(s) == 0 || len(s) > 96 {
		return ErrName
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ErrName
		}
	}
	return nil
}
