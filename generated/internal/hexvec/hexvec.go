// Package hexvec reads commented hex test vectors: each line holds hex bytes (spaces ignored),
// and everything after a '#' is a comment naming the field.
package hexvec

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Bytes joins lines of commented hex into bytes, failing the test on malformed input.
func Bytes(t testing.TB, lines ...string) []byte {
	t.Helper()
	var sb strings.Builder
	for _, l := range lines {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		sb.WriteString(strings.ReplaceAll(l, " ", ""))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("bad test vector: %v", err)
	}
	return b
}

// Text returns the hex of a string, for vectors that spell out ASCII.
func Text(s string) string { return hex.EncodeToString([]byte(s)) }
