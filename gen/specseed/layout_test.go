package specseed

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Frame layouts. Both the seed and the YAML are flattened to a sequence of wire tokens: a leaf is
// "type:name", a repeated group is "count{" ... "}", named records are expanded in place and enums
// are replaced by their wire type. A "*" name matches any name.

type token struct{ typ, name string }

func (k token) String() string { return k.typ + ":" + k.name }

var (
	frameHeading  = regexp.MustCompile(`^([A-Za-z]+)(?: Frame)? \((0x[0-9A-F]{2})\)(?: — .*)?:?$`)
	recordHeading = regexp.MustCompile(`^A ([a-z_]+)(?:,.*)?:$`)
	bodyField     = regexp.MustCompile(`^\[([^:\]]+): ([a-z_]+)\]`)
	bodyRecord    = regexp.MustCompile(`^\[([a-z_]+)\]`)
	forEach       = regexp.MustCompile(`^For each\b.*:$`)
)

type seedLine struct {
	indent int
	text   string
}

// seedBodies returns the body lines of each frame section (by opcode) and of each named record
// definition (by name). A frame heading is followed by prose, then the body starting at its
// "[frame header" line; a heading with no body before the next heading (the table of contents at
// the end of the document) is not a section.
func seedBodies(lines []string) (map[int][]seedLine, map[string][]seedLine) {
	frames := map[int][]seedLine{}
	records := map[string][]seedLine{}
	for i := 0; i < len(lines); i++ {
		if m := frameHeading.FindStringSubmatch(lines[i]); m != nil {
			op, _ := strconv.ParseInt(m[2][2:], 16, 32)
			for j := i + 1; j < len(lines) && !frameHeading.MatchString(lines[j]); j++ {
				if strings.HasPrefix(lines[j], "[frame header") {
					if _, dup := frames[int(op)]; dup {
						panic(fmt.Sprintf("seed has two sections for opcode 0x%02X", op))
					}
					frames[int(op)], i = bodyAfter(lines, j-1)
					break
				}
			}
		} else if m := recordHeading.FindStringSubmatch(lines[i]); m != nil {
			records[m[1]], i = bodyAfter(lines, i)
		}
	}
	return frames, records
}

// bodyAfter collects the body following the heading at lines[i]: the run of bracketed lines,
// "For each" lines, comments and blank lines up to the first line of prose. It returns the body
// and the index of its last line.
func bodyAfter(lines []string, i int) ([]seedLine, int) {
	var body []seedLine
	j := i + 1
	for ; j < len(lines); j++ {
		l := lines[j]
		trimmed := strings.TrimLeft(l, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		if !strings.HasPrefix(trimmed, "[") && !forEach.MatchString(trimmed) {
			break
		}
		if strings.HasPrefix(trimmed, "[frame header") {
			continue
		}
		body = append(body, seedLine{indent: len(l) - len(trimmed), text: trimmed})
	}
	return body, j - 1
}

// flattenSeed turns body lines into tokens, expanding [record] lines from records.
func flattenSeed(lines []seedLine, records map[string][]seedLine) ([]token, error) {
	var out []token
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := bodyField.FindStringSubmatch(l.text); m != nil {
			typ, name := m[1], m[2]
			if i+1 < len(lines) && forEach.MatchString(lines[i+1].text) && lines[i+1].indent == l.indent {
				// A count, then the group's body: the lines indented deeper than the "For each".
				j := i + 2
				for j < len(lines) && lines[j].indent > l.indent {
					j++
				}
				inner, err := flattenSeed(lines[i+2:j], records)
				if err != nil {
					return nil, err
				}
				out = append(out, token{typ: typ + "{", name: "*"})
				out = append(out, inner...)
				out = append(out, token{typ: "}", name: "*"})
				i = j - 1
				continue
			}
			out = append(out, token{typ: typ, name: name})
			continue
		}
		if m := bodyRecord.FindStringSubmatch(l.text); m != nil {
			body, ok := records[m[1]]
			if !ok {
				return nil, fmt.Errorf("seed refers to undefined record %q", m[1])
			}
			inner, err := flattenSeed(body, records)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
			continue
		}
		return nil, fmt.Errorf("unparsed seed line %q", l.text)
	}
	return out, nil
}

// flattener expands YAML fields to tokens. resolve maps a named scalar type to how the source
// document writes it.
type flattener struct {
	s       *spec
	resolve func(typ string) string
}

func (f *flattener) enum(name string) *specEnum {
	for i := range f.s.Enums {
		if f.s.Enums[i].Name == name {
			return &f.s.Enums[i]
		}
	}
	return nil
}

func (f *flattener) record(name string) *specRecord {
	for i := range f.s.Records {
		if f.s.Records[i].Name == name {
			return &f.s.Records[i]
		}
	}
	return nil
}

func (f *flattener) list(name string) *specList {
	for i := range f.s.Lists {
		if f.s.Lists[i].Name == name {
			return &f.s.Lists[i]
		}
	}
	return nil
}

// scalar renders a type usable inside optional<> or as a leaf.
func (f *flattener) scalar(typ string) (string, error) {
	switch {
	case strings.HasPrefix(typ, "optional<") && strings.HasSuffix(typ, ">"):
		inner, err := f.scalar(typ[len("optional<") : len(typ)-1])
		return "optional<" + inner + ">", err
	case strings.HasPrefix(typ, "map<"):
		return strings.ReplaceAll(typ, " ", ""), nil
	}
	if e := f.enum(typ); e != nil {
		return f.resolve(e.Type), nil
	}
	for _, b := range f.s.Bitsets {
		if b.Name == typ {
			return f.resolve(b.Type), nil
		}
	}
	if l := f.list(typ); l != nil {
		return typ, nil // the seed writes lists ("key") as primitives
	}
	for _, t := range f.s.Types {
		if t.Name == typ {
			return f.resolve(typ), nil
		}
	}
	return "", fmt.Errorf("unknown type %q", typ)
}

func (f *flattener) fields(fields []specField) ([]token, error) {
	var out []token
	for _, fd := range fields {
		switch {
		case fd.Count != "":
			var inner []token
			var err error
			if len(fd.Fields) > 0 {
				inner, err = f.fields(fd.Fields)
			} else if r := f.record(fd.Type); r != nil {
				inner, err = f.fields(r.Fields)
			} else {
				var typ string
				typ, err = f.scalar(fd.Type)
				inner = []token{{typ: typ, name: "*"}}
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fd.Name, err)
			}
			out = append(out, token{typ: fd.Count + "{", name: "*"})
			out = append(out, inner...)
			out = append(out, token{typ: "}", name: "*"})
		case strings.HasSuffix(fd.Type, "[]"):
			typ, err := f.scalar(strings.TrimSuffix(fd.Type, "[]"))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fd.Name, err)
			}
			out = append(out, token{typ: f.s.Framing.ArrayCount + "{", name: "*"}, token{typ: typ, name: "*"}, token{typ: "}", name: "*"})
		case f.record(fd.Type) != nil:
			inner, err := f.fields(f.record(fd.Type).Fields)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fd.Name, err)
			}
			out = append(out, inner...)
		default:
			typ, err := f.scalar(fd.Type)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fd.Name, err)
			}
			out = append(out, token{typ: typ, name: fd.Name})
		}
	}
	return out, nil
}

func sameTokens(a, b []token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].typ != b[i].typ {
			return false
		}
		if a[i].name != b[i].name && a[i].name != "*" && b[i].name != "*" {
			return false
		}
	}
	return true
}

func TestFIBPFrameLayoutsMatchSeed(t *testing.T) {
	lines := readSource(t, fibpSeed)
	s := loadSpec(t, fibpYAML)
	bodies, records := seedBodies(lines)
	// Every opcode but Ping, Pong and Disconnect has a section (some with an empty body).
	if len(bodies) != 58 {
		t.Errorf("seed parse found %d frame sections, want 58", len(bodies))
	}
	for _, name := range []string{"throttle_summary", "bucket_stats"} {
		if _, ok := records[name]; !ok {
			t.Errorf("seed parse found no definition of %s", name)
		}
	}
	fl := &flattener{s: s, resolve: func(typ string) string { return typ }}
	for _, f := range s.Frames {
		body, ok := bodies[f.Opcode]
		if !ok {
			// Ping, Pong and Disconnect have no section: no body.
			if len(f.Fields) != 0 {
				t.Errorf("opcode 0x%02X %s: the seed gives no body, yaml has fields", f.Opcode, f.Name)
			}
			continue
		}
		want, err := flattenSeed(body, records)
		if err != nil {
			t.Errorf("opcode 0x%02X %s: seed: %v", f.Opcode, f.Name, err)
			continue
		}
		got, err := fl.fields(withoutAppended(f.Fields))
		if err != nil {
			t.Errorf("opcode 0x%02X %s: yaml: %v", f.Opcode, f.Name, err)
			continue
		}
		if !sameTokens(got, want) {
			t.Errorf("opcode 0x%02X %s: layout differs\n yaml: %v\n seed: %v", f.Opcode, f.Name, got, want)
		}
	}
}

// appendedDoc starts the doc of a field added after the seed by the spec's schema evolution rule
// (new fields go at the end of a body; readers ignore trailing bytes they do not know).
const appendedDoc = "Appended (schema evolution)"

// withoutAppended drops the trailing fields documented as appended, so that the rest must match
// the seed exactly; an appended field followed by a seed field is left in (and fails the match).
func withoutAppended(fields []specField) []specField {
	n := len(fields)
	for n > 0 && strings.HasPrefix(fields[n-1].Doc, appendedDoc) {
		n--
	}
	return fields[:n]
}

func TestFIBPEveryFieldHasDoc(t *testing.T) {
	s := loadSpec(t, fibpYAML)
	checkDocs(t, "fibp", s)
}

func checkDocs(t *testing.T, proto string, s *spec) {
	var walk func(where string, fields []specField)
	walk = func(where string, fields []specField) {
		for _, f := range fields {
			if strings.TrimSpace(f.Doc) == "" {
				t.Errorf("%s: %s.%s has no doc", proto, where, f.Name)
			}
			walk(where+"."+f.Name, f.Fields)
		}
	}
	for _, f := range s.Frames {
		if strings.TrimSpace(f.Doc) == "" {
			t.Errorf("%s: frame %s has no doc", proto, f.Name)
		}
		walk(f.Name, f.Fields)
	}
	for _, r := range s.Records {
		walk(r.Name, r.Fields)
	}
	for _, e := range s.Enums {
		for _, v := range e.Values {
			if strings.TrimSpace(v.Doc) == "" {
				t.Errorf("%s: enum %s value %s has no doc", proto, e.Name, v.Name)
			}
		}
	}
}
