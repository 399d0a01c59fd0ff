package auth

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is what a permission allows on the names its pattern matches: queue names for produce,
// consume and admin, throttle names for throttle.
type Kind uint8

const (
	Produce Kind = iota + 1 // Enqueue
	Consume                 // Consume, Ack, Nack, ExtendLease
	Admin                   // CreateQueue, UpdateQueue, DeleteQueue, GetStats, Redrive
	// Throttle: declaring the throttle in a Consume, GetThrottleStats, GetThrottleBucket. Its
	// pattern matches throttle names, not queues (Fila's extension of the FIBP kinds).
	Throttle
)

var kindNames = map[Kind]string{Produce: "produce", Consume: "consume", Admin: "admin", Throttle: "throttle"}

// OnQueues reports whether the kind's patterns match queue names (all but Throttle).
func (k Kind) OnQueues() bool { return k != Throttle }

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind reads a kind's name ("produce", "consume", "admin", "throttle").
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown permission kind %q (want produce, consume, admin or throttle)", s)
}

// Permission allows Kind on the queues Pattern matches.
type Permission struct {
	Kind    Kind
	Pattern string
}

// CheckPattern reports why p cannot be a permission pattern: it must be 1 to 255 bytes of
// valid UTF-8 without control or bidi-override characters (the rules of queue names, plus *).
func CheckPattern(p string) error {
	if p == "" || len(p) > 255 {
		return fmt.Errorf("pattern %q must be 1 to 255 bytes", p)
	}
	if !utf8.ValidString(p) || strings.ContainsFunc(p, Unsafe) {
		return fmt.Errorf("pattern %q has invalid UTF-8, control or bidi-override characters", p)
	}
	return nil
}

// Unsafe reports whether r may not appear in a queue name or pattern: Unicode control and
// format-override characters, which can make a name print as another.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || bidiOverride(r) || r == utf8.RuneError
}

// bidiOverride reports the bidirectional embedding, override and isolate characters.
func bidiOverride(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F || r == 0x061C
}

// Match reports whether the glob pattern matches name: * matches any run of bytes (the empty
// one too), every other byte matches itself. It runs in O(len(pattern)·len(name)) at worst,
// without recursion.
func Match(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0 // the last * seen, and where in name its run ends for now
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0: // let the last * take one more byte
			mark++
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
