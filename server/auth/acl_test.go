package auth

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"orders", "orders", true},
		{"orders", "orders.dlq", false}, // security.md: a literal pattern is the queue itself only
		{"orders", "order", false},
		{"orders", "xorders", false},
		{"orders.*", "orders.dlq", true},
		{"orders.*", "orders.", true},
		{"orders.*", "orders", false},
		{"orders*", "orders", true},
		{"orders*", "orders.dlq", true},
		{"*", "", true},
		{"*", "anything", true},
		{"*.dlq", "orders.dlq", true},
		{"*.dlq", "orders.dlqx", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a*b", "ab.b", true},
		{"tenant-?", "tenant-1", false}, // ? is literal
		{"tenant-[12]", "tenant-1", false},
		{"tenant-[12]", "tenant-[12]", true},
		{"", "", true},
		{"", "x", false},
	} {
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

// Match agrees with the regular expression the glob stands for.
func TestMatchProperty(t *testing.T) {
	alphabet := rapid.SampledFrom([]rune("ab.*"))
	rapid.Check(t, func(t *rapid.T) {
		pattern := string(rapid.SliceOfN(alphabet, 0, 8).Draw(t, "pattern"))
		name := strings.ReplaceAll(string(rapid.SliceOfN(alphabet, 0, 10).Draw(t, "name")), "*", "a")
		var re strings.Builder
		re.WriteString("^")
		for _, part := range strings.Split(pattern, "*") {
			re.WriteString(regexp.QuoteMeta(part) + ".*")
		}
		want := regexp.MustCompile(strings.TrimSuffix(re.String(), ".*") + "$").MatchString(name)
		if got := Match(pattern, name); got != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", pattern, name, got, want)
		}
	})
}

func TestParseKind(t *testing.T) {
	for _, k := range []Kind{Produce, Consume, Admin, Throttle} {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	for _, s := range []string{"", "Produce", "read", "superadmin"} {
		if _, err := ParseKind(s); err == nil {
			t.Errorf("ParseKind(%q) accepted", s)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	for _, ok := range []string{"orders", "orders.*", "*", "tenant-ä"} {
		if err := CheckPattern(ok); err != nil {
			t.Errorf("CheckPattern(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a\x00b", "a\nb", "evil\u202egnp", "a\u2066b", "\xff", strings.Repeat("a", 256)} {
		if CheckPattern(bad) == nil {
			t.Errorf("CheckPattern(%q) accepted", bad)
		}
	}
}

// A throttle permission names throttles: it allows declaring the throttle, and says nothing of
// a queue of the same name (ListQueues does not show it; no queue kind matches it).
func TestThrottlePermissionNamesThrottlesOnly(t *testing.T) {
	p := &Principal{rec: Record{ID: "k", ACL: []Permission{{Kind: Throttle, Pattern: "tenant-a.*"}}}}
	if !p.Allowed(Throttle, "tenant-a.stripe") || p.Allowed(Throttle, "tenant-b.stripe") {
		t.Fatal("the throttle pattern does not decide which throttles the key may declare")
	}
	for _, k := range []Kind{Produce, Consume, Admin} {
		if p.Allowed(k, "tenant-a.stripe") {
			t.Fatalf("a throttle permission allowed %s on a queue of a matching name", k)
		}
	}
	if p.Any("tenant-a.stripe") {
		t.Fatal("a throttle permission made a queue of a matching name visible")
	}
	q := &Principal{rec: Record{ID: "k", ACL: []Permission{{Kind: Consume, Pattern: "*"}}}}
	if q.Allowed(Throttle, "anything") {
		t.Fatal("a consume permission on every queue allowed a throttle")
	}
}
