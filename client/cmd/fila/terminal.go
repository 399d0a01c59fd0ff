package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text from producers (payloads, header names, Rift subjects) reaches the terminal of whoever
// runs the CLI. Control characters in it could drive that terminal (escape sequences set the
// title, write the clipboard, hide lines), and bidirectional overrides could make it read
// differently from what it is, so the human-readable output quotes any such text.

// unsafeRune reports whether r must not reach a terminal as it is: a control character other than
// tab and newline, a byte that is not UTF-8 (RuneError), or a bidirectional override or isolate.
func unsafeRune(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case unicode.IsControl(r) || r == utf8.RuneError:
		return true
	default:
		return r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
	}
}

// shown is s as the human-readable output prints it: unchanged, or Go-quoted (every unsafe
// character escaped) when it holds one.
func shown(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	return strconv.QuoteToASCII(s)
}
