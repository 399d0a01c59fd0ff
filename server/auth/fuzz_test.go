package auth

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// naiveMatch is Match by dynamic programming over (pattern, name) positions: the glob's meaning
// written out, with no backtracking trick to get wrong.
func naiveMatch(pattern, name string) bool {
	// ok[j] reports whether pattern[:i] matches name[:j], for the current i.
	ok := make([]bool, len(name)+1)
	ok[0] = true
	for i := 0; i < len(pattern); i++ {
		next := make([]bool, len(name)+1)
		for j := 0; j <= len(name); j++ {
			if pattern[i] == '*' {
				next[j] = ok[j] || j > 0 && next[j-1]
			} else {
				next[j] = j > 0 && ok[j-1] && pattern[i] == name[j-1]
			}
		}
		ok = next
	}
	return ok[len(name)]
}

// FuzzMatch checks permission patterns, which decide every request's access: CheckPattern never
// panics and refuses what it documents, and Match agrees with a naive twin on any name, so no
// pattern grants a queue it does not match.
func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"orders.*", "orders.eu"}, {"*", ""}, {"a*b*c", "aXbYbc"}, {"**", "x"}, {"*a", "aaa"},
		{"q", "q"}, {"q*", "p"}, {"é*", "éé"}, {"a*\u202e", "a\u202e"}, {"", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 512 || len(name) > 512 {
			return // the twin is quadratic; CheckPattern caps real patterns at 255 bytes
		}
		err := CheckPattern(pattern)
		bad := pattern == "" || len(pattern) > 255 || !utf8.ValidString(pattern) || strings.ContainsFunc(pattern, Unsafe)
		if (err != nil) != bad {
			t.Fatalf("CheckPattern(%q) = %v", pattern, err)
		}
		if got, want := Match(pattern, name), naiveMatch(pattern, name); got != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", pattern, name, got, want)
		}
		if !strings.Contains(pattern, "*") && Match(pattern, name) != (pattern == name) {
			t.Fatalf("pattern %q without * matches %q", pattern, name)
		}
	})
}
