package subject

import (
	"slices"
	"strings"
	"testing"
)

// FuzzSubject checks the subject rules on arbitrary text, which reaches them from every PUBLISH,
// SUBSCRIBE and permission: validation never panics and agrees with itself (a valid subject is
// a valid pattern; a pattern with no wildcard token is a valid subject), Match agrees with a
// naive twin (naiveMatch, subject_test.go) and with an Index holding the patterns, and Contains and Overlaps are consistent
// with Match on the subjects the inputs give.
func FuzzSubject(f *testing.F) {
	for _, seed := range [][3]string{
		{"a.*", "a.>", "a.b"}, {">", "*.*", "x.y"}, {"a.b.c", "a.*.c", "a.b.c"}, {"game.*", "game.>", "game.x.y"},
		{"a..b", "a.b.", ".a"}, {"a*", "a.>.b", "a b"}, {"é.\u00a0", "\x00", "\xff"}, {"*", "*", "z"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, p, q, s string) {
		for _, x := range []string{p, q, s} {
			lit, pat := Valid(x), ValidPattern(x)
			if lit == nil && pat != nil {
				t.Fatalf("%q is a valid subject but not a valid pattern: %v", x, pat)
			}
			if pat == nil && lit != nil && !slices.ContainsFunc(strings.Split(x, "."), func(tok string) bool { return tok == "*" || tok == ">" }) {
				t.Fatalf("pattern %q has no wildcard token but is not a valid subject: %v", x, lit)
			}
			if (lit == nil || pat == nil) && len(x) > MaxLen {
				t.Fatalf("%q (%d bytes) is accepted past MaxLen", x, len(x))
			}
			_ = ValidName(x)
		}
		if ValidPattern(p) != nil || ValidPattern(q) != nil {
			return
		}
		var x Index[int]
		x.Insert(p, 1)
		if p != q {
			x.Insert(q, 2)
		}
		subjects := []string{s, p, q, strings.ReplaceAll(strings.ReplaceAll(p, "*", "w"), ">", "w.v")}
		for _, subj := range subjects {
			if Valid(subj) != nil {
				continue
			}
			mp, mq := Match(p, subj), Match(q, subj)
			if mp != naiveMatch(p, subj) || mq != naiveMatch(q, subj) {
				t.Fatalf("Match(%q|%q, %q) = %v|%v; the naive twin says %v|%v", p, q, subj, mp, mq, naiveMatch(p, subj), naiveMatch(q, subj))
			}
			got := x.Match(nil, subj)
			slices.Sort(got)
			var want []int
			if mp {
				want = append(want, 1)
			}
			if mq && p != q {
				want = append(want, 2)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Index.Match(%q) with %q=1, %q=2 is %v, want %v", subj, p, q, got, want)
			}
			if mp && mq && (!Overlaps(p, q) || !Overlaps(q, p)) {
				t.Fatalf("%q matches %q and %q, but they do not overlap", subj, p, q)
			}
			if mq && !mp && Contains(p, q) {
				t.Fatalf("%q contains %q, but %q matches only the second", p, q, subj)
			}
		}
		if Contains(p, q) && !Overlaps(p, q) {
			t.Fatalf("%q contains %q but does not overlap it", p, q)
		}
		if !Contains(p, p) {
			t.Fatalf("%q does not contain itself", p)
		}
		if !x.Remove(p, 1) || (p != q && !x.Remove(q, 2)) || x.Len() != 0 || len(x.Match(nil, s)) != 0 {
			t.Fatalf("the index is not empty after removing %q and %q", p, q)
		}
	})
}
