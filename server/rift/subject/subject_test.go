package subject

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		s              string
		literal, patOK bool
	}{
		{"a", true, true}, {"a.b.c", true, true}, {"héllo.wörld", true, true},
		{"a.*", false, true}, {"a.>", false, true}, {">", false, true}, {"*", false, true}, {"*.*.>", false, true},
		{"", false, false}, {".", false, false}, {"a.", false, false}, {".a", false, false}, {"a..b", false, false},
		{"a b", false, false}, {"a\tb", false, false}, {"a\x00", false, false}, {"a\u00a0b", false, false},
		{"a.>.b", false, false}, {"a*", false, false}, {"a.b>", false, false}, {">.a", false, false},
		{strings.Repeat("a", 1025), false, false}, {strings.Repeat("a", 1024), true, true},
	} {
		if got := Valid(tc.s) == nil; got != tc.literal {
			t.Errorf("Valid(%q) ok=%v, want %v (%v)", tc.s, got, tc.literal, Valid(tc.s))
		}
		if got := ValidPattern(tc.s) == nil; got != tc.patOK {
			t.Errorf("ValidPattern(%q) ok=%v, want %v (%v)", tc.s, got, tc.patOK, ValidPattern(tc.s))
		}
	}
}

func TestMatchContainsOverlaps(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"a.b", "a.b", true}, {"a.b", "a.c", false}, {"a.*", "a.b", true}, {"a.*", "a", false},
		{"a.*", "a.b.c", false}, {"a.>", "a.b.c", true}, {"a.>", "a", false}, {">", "x", true},
		{"*.b.>", "a.b.c.d", true}, {"*.b.>", "a.c.c.d", false},
	} {
		if got := Match(tc.p, tc.s); got != tc.want {
			t.Errorf("Match(%q,%q)=%v", tc.p, tc.s, got)
		}
	}
	for _, tc := range []struct {
		outer, inner string
		want         bool
	}{
		{"game.*", "game.x", true}, {"game.*", "game.*", true}, {"game.*", "game.>", false},
		{"game.*", ">", false}, {"game.>", "game", false}, {"game.>", "game.a.*", true},
		{">", "rift.control", true}, {"a.*.c", "a.b.c", true}, {"a.b.c", "a.*.c", false},
		{"_INBOX.paper.>", "_INBOX.paper.x1", true}, {"_INBOX.paper.>", "_INBOX.other.x", false},
	} {
		if got := Contains(tc.outer, tc.inner); got != tc.want {
			t.Errorf("Contains(%q,%q)=%v", tc.outer, tc.inner, got)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{">", "rift.control", true}, {"rift.*", "rift.control", true}, {"*.*", "rift.control.x", false},
		{"rift.control.>", "rift.control", false}, {"a.*.c", "*.b.*", true}, {"a.b", "a.c", false},
	} {
		if got := Overlaps(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlaps(%q,%q)=%v", tc.a, tc.b, got)
		}
	}
}

// Generators over a tiny alphabet so that wildcards, prefixes and equal tokens collide often.
func genSubject() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		toks := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "c"}), 1, 4).Draw(t, "toks")
		return strings.Join(toks, ".")
	})
}

func genPattern() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		toks := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "*"}), 1, 4).Draw(t, "toks")
		if rapid.Bool().Draw(t, "gt") {
			toks[len(toks)-1] = ">"
		}
		return strings.Join(toks, ".")
	})
}

// naiveMatch is the twin of Match: token lists compared one by one.
func naiveMatch(p, s string) bool {
	pt, st := strings.Split(p, "."), strings.Split(s, ".")
	for i, tok := range pt {
		if tok == ">" {
			return len(st) > i
		}
		if i >= len(st) || (tok != "*" && tok != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// every subject over the alphabet of genSubject (plus "z"), up to five tokens: the universe the
// containment and overlap twins quantify over.
func universe() []string {
	var out []string
	var rec func(prefix string, depth int)
	rec = func(prefix string, depth int) {
		if depth == 5 {
			return
		}
		for _, tok := range []string{"a", "b", "c", "z"} {
			s := tok
			if prefix != "" {
				s = prefix + "." + tok
			}
			out = append(out, s)
			rec(s, depth+1)
		}
	}
	rec("", 0)
	return out
}

func TestMatchAgainstTwin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, s := genPattern().Draw(t, "p"), genSubject().Draw(t, "s")
		if Match(p, s) != naiveMatch(p, s) {
			t.Fatalf("Match(%q,%q)=%v, twin says %v", p, s, Match(p, s), naiveMatch(p, s))
		}
	})
}

func TestContainsAndOverlapsAgainstTwin(t *testing.T) {
	u := universe()
	rapid.Check(t, func(t *rapid.T) {
		a, b := genPattern().Draw(t, "a"), genPattern().Draw(t, "b")
		contains, overlaps := true, false
		for _, s := range u {
			ma, mb := naiveMatch(a, s), naiveMatch(b, s)
			if mb && !ma {
				contains = false
			}
			if ma && mb {
				overlaps = true
			}
		}
		if Contains(a, b) != contains {
			t.Fatalf("Contains(%q,%q)=%v, twin says %v", a, b, Contains(a, b), contains)
		}
		if Overlaps(a, b) != overlaps {
			t.Fatalf("Overlaps(%q,%q)=%v, twin says %v", a, b, Overlaps(a, b), overlaps)
		}
	})
}

// TestIndexAgainstTwin inserts and removes random patterns and compares Match with a scan of
// every entry.
func TestIndexAgainstTwin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var x Index[int]
		type entry struct {
			p string
			v int
		}
		var entries []entry
		for i := range rapid.IntRange(1, 40).Draw(t, "ops") {
			if len(entries) > 0 && rapid.IntRange(0, 3).Draw(t, "remove") == 0 {
				j := rapid.IntRange(0, len(entries)-1).Draw(t, "which")
				if !x.Remove(entries[j].p, entries[j].v) {
					t.Fatalf("Remove(%q,%d) found nothing", entries[j].p, entries[j].v)
				}
				entries = slices.Delete(entries, j, j+1)
				continue
			}
			p := genPattern().Draw(t, "p")
			x.Insert(p, i)
			entries = append(entries, entry{p, i})
		}
		if x.Len() != len(entries) {
			t.Fatalf("Len=%d, want %d", x.Len(), len(entries))
		}
		for range 10 {
			s := genSubject().Draw(t, "s")
			got := x.Match(nil, s)
			var want []int
			for _, e := range entries {
				if naiveMatch(e.p, s) {
					want = append(want, e.v)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("Match(%q)=%v, want %v", s, got, want)
			}
		}
		for _, e := range entries {
			x.Remove(e.p, e.v)
		}
		if !x.root.empty() {
			t.Fatalf("index not pruned after removing everything: %+v", x.root)
		}
	})
}

func BenchmarkIndexMatch(b *testing.B) {
	var x Index[int]
	for i := range 10000 {
		x.Insert("svc."+strings.Repeat("x", i%7+1)+"."+string(rune('a'+i%26))+".*", i)
	}
	x.Insert("svc.>", -1)
	var dst []int
	b.ReportAllocs()
	for b.Loop() {
		dst = x.Match(dst[:0], "svc.xxx.c.req")
	}
}
