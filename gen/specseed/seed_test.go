// Package specseed checks the protocol descriptions in spec/ against the source documents they were
// written from: the opcode tables, the error code table and the frame layouts.
package specseed

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	fibpYAML = "../../spec/fibp.yaml"
	riftYAML = "../../spec/rift.yaml"
	fibpSeed = "../../docs/spec/fibp-v1.txt" // the FIBP specification, kept in the repository
	riftMD   = "../../docs/semantics/rift.md"
)

// A minimal view of the spec schema (spec/README.md).

type specField struct {
	Name   string      `yaml:"name"`
	Type   string      `yaml:"type"`
	Count  string      `yaml:"count"`
	Item   string      `yaml:"item"`
	Doc    string      `yaml:"doc"`
	Fields []specField `yaml:"fields"`
}

type specFrame struct {
	Opcode    int         `yaml:"opcode"`
	Name      string      `yaml:"name"`
	Direction string      `yaml:"direction"`
	Group     string      `yaml:"group"`
	MaxBody   int         `yaml:"max_body"`
	Doc       string      `yaml:"doc"`
	Fields    []specField `yaml:"fields"`
	Examples  []struct {
		Name string   `yaml:"name"`
		Doc  string   `yaml:"doc"`
		Hex  []string `yaml:"hex"`
	} `yaml:"examples"`
}

type specEnum struct {
	Name   string `yaml:"name"`
	Type   string `yaml:"type"`
	Prefix string `yaml:"prefix"`
	Doc    string `yaml:"doc"`
	Values []struct {
		Value int    `yaml:"value"`
		Name  string `yaml:"name"`
		Doc   string `yaml:"doc"`
	} `yaml:"values"`
}

type specRecord struct {
	Name   string      `yaml:"name"`
	Doc    string      `yaml:"doc"`
	Fields []specField `yaml:"fields"`
}

type specList struct {
	Name  string `yaml:"name"`
	Item  string `yaml:"item"`
	Count string `yaml:"count"`
	Doc   string `yaml:"doc"`
}

type specType struct {
	Name   string `yaml:"name"`
	Kind   string `yaml:"kind"`
	Size   int    `yaml:"size"`
	Signed bool   `yaml:"signed"`
	Length string `yaml:"length"`
	Max    int    `yaml:"max"`
	UTF8   bool   `yaml:"utf8"`
	Rest   bool   `yaml:"rest"`
}

type specBitset struct {
	Name   string `yaml:"name"`
	Type   string `yaml:"type"`
	Prefix string `yaml:"prefix"`
	Bits   []struct {
		Bit  int    `yaml:"bit"`
		Name string `yaml:"name"`
		Doc  string `yaml:"doc"`
	} `yaml:"bits"`
}

type specConstants struct {
	Name   string `yaml:"name"`
	Prefix string `yaml:"prefix"`
	Values []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
		Doc   string `yaml:"doc"`
	} `yaml:"values"`
}

type spec struct {
	Protocol string `yaml:"protocol"`
	Title    string `yaml:"title"`
	Version  int    `yaml:"version"`
	Doc      string `yaml:"doc"`
	Framing  struct {
		Length     string      `yaml:"length"`
		Header     []specField `yaml:"header"`
		MinFrame   int         `yaml:"min_frame"`
		MaxFrame   int         `yaml:"max_frame"`
		Trailing   string      `yaml:"trailing"`
		MapCount   string      `yaml:"map_count"`
		ArrayCount string      `yaml:"array_count"`
	} `yaml:"framing"`
	Types     []specType      `yaml:"types"`
	Enums     []specEnum      `yaml:"enums"`
	Bitsets   []specBitset    `yaml:"bitsets"`
	Constants []specConstants `yaml:"constants"`
	Records   []specRecord    `yaml:"records"`
	Lists     []specList      `yaml:"lists"`
	Frames    []specFrame     `yaml:"frames"`
}

func loadSpec(t *testing.T, path string) *spec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Strict: a key the schema (spec/README.md) does not define is an error.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s spec
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &s
}

func readSource(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("source %s not present: the seed tables are test data kept in the repository", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
}

// ---------------------------------------------------------------------------------------------
// FIBP

var (
	opcodeRow    = regexp.MustCompile("^`0x([0-9A-Fa-f]{2})`\t([A-Za-z]+)\t([^\t]+)\t([^\t]+)$")
	errorCodeRow = regexp.MustCompile("^`0x([0-9A-Fa-f]{2})`\t([A-Za-z]+)\t([^\t]+)$")
)

type seedOpcode struct {
	name, direction, desc string
}

type seedCode struct {
	name, desc string
}

func parseHex(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.ParseInt(s, 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}

func seedTables(t *testing.T, lines []string) (map[int]seedOpcode, map[int]seedCode) {
	opcodes := map[int]seedOpcode{}
	codes := map[int]seedCode{}
	for _, line := range lines {
		if m := opcodeRow.FindStringSubmatch(line); m != nil {
			var dir string
			switch m[3] {
			case "Client → Server":
				dir = "client"
			case "Server → Client":
				dir = "server"
			case "Either → Either":
				dir = "both"
			default:
				t.Fatalf("seed opcode row with unknown direction: %q", line)
			}
			op := parseHex(t, m[1])
			if _, dup := opcodes[op]; dup {
				t.Fatalf("seed lists opcode 0x%02X twice", op)
			}
			opcodes[op] = seedOpcode{name: m[2], direction: dir, desc: m[4]}
			continue
		}
		if m := errorCodeRow.FindStringSubmatch(line); m != nil {
			c := parseHex(t, m[1])
			if _, dup := codes[c]; dup {
				t.Fatalf("seed lists error code 0x%02X twice", c)
			}
			codes[c] = seedCode{name: m[2], desc: m[3]}
		}
	}
	return opcodes, codes
}

func TestFIBPOpcodesMatchSeed(t *testing.T) {
	lines := readSource(t, fibpSeed)
	s := loadSpec(t, fibpYAML)
	opcodes, _ := seedTables(t, lines)

	if len(opcodes) != 61 {
		t.Errorf("seed opcode table has %d rows, want 61", len(opcodes))
	}
	if len(s.Frames) != 61 {
		t.Errorf("fibp.yaml has %d frames, want 61", len(s.Frames))
	}
	seen := map[int]bool{}
	for i, f := range s.Frames {
		if seen[f.Opcode] {
			t.Errorf("fibp.yaml: opcode 0x%02X appears twice", f.Opcode)
		}
		seen[f.Opcode] = true
		want, ok := opcodes[f.Opcode]
		if !ok {
			t.Errorf("fibp.yaml: frame %s has opcode 0x%02X, not in the seed", f.Name, f.Opcode)
			continue
		}
		if f.Name != want.name {
			t.Errorf("opcode 0x%02X: name %q, seed says %q", f.Opcode, f.Name, want.name)
		}
		if f.Direction != want.direction {
			t.Errorf("opcode 0x%02X %s: direction %q, seed says %q", f.Opcode, f.Name, f.Direction, want.direction)
		}
		if !strings.Contains(f.Doc, want.desc) {
			t.Errorf("opcode 0x%02X %s: doc %q lacks the seed description %q", f.Opcode, f.Name, f.Doc, want.desc)
		}
		if g := fibpGroup(f.Opcode); f.Group != g {
			t.Errorf("opcode 0x%02X %s: group %q, want %q", f.Opcode, f.Name, f.Group, g)
		}
		if i > 0 && opcodeOrder(s.Frames[i-1].Opcode) >= opcodeOrder(f.Opcode) {
			t.Errorf("opcode 0x%02X %s is out of opcode-table order", f.Opcode, f.Name)
		}
	}
	for op, want := range opcodes {
		if !seen[op] {
			t.Errorf("fibp.yaml lacks opcode 0x%02X %s", op, want.name)
		}
	}
}

func fibpGroup(op int) string {
	switch {
	case op <= 0x0F:
		return "control"
	case op <= 0x1F:
		return "hot_path"
	case op == 0xFE:
		return "error"
	default:
		return "admin"
	}
}

// opcodeOrder is the position in the seed's opcode table: control, hot path, error, then admin
// opcodes downward from 0xFD.
func opcodeOrder(op int) int {
	switch {
	case op <= 0x1F:
		return op
	case op == 0xFE:
		return 0x100
	default:
		return 0x200 + (0xFD - op)
	}
}

func TestFIBPErrorCodesMatchSeed(t *testing.T) {
	lines := readSource(t, fibpSeed)
	s := loadSpec(t, fibpYAML)
	_, codes := seedTables(t, lines)

	if len(codes) != 29 {
		t.Errorf("seed error code table has %d rows, want 29", len(codes))
	}
	var enum *specEnum
	for i := range s.Enums {
		if s.Enums[i].Name == "error_code" {
			enum = &s.Enums[i]
		}
	}
	if enum == nil {
		t.Fatal("fibp.yaml has no error_code enum")
	}
	if enum.Type != "u8" || enum.Prefix != "Code" {
		t.Errorf("error_code: type %q prefix %q, want u8 Code", enum.Type, enum.Prefix)
	}
	if len(enum.Values) != 29 {
		t.Errorf("error_code has %d values, want 29", len(enum.Values))
	}
	seen := map[int]bool{}
	for _, v := range enum.Values {
		if seen[v.Value] {
			t.Errorf("error_code 0x%02X appears twice", v.Value)
		}
		seen[v.Value] = true
		want, ok := codes[v.Value]
		if !ok {
			t.Errorf("error_code 0x%02X %s is not in the seed", v.Value, v.Name)
			continue
		}
		if v.Name != want.name {
			t.Errorf("error_code 0x%02X: name %q, seed says %q", v.Value, v.Name, want.name)
		}
		if v.Doc != want.desc {
			t.Errorf("error_code 0x%02X %s: doc %q, seed says %q", v.Value, v.Name, v.Doc, want.desc)
		}
	}
	for c, want := range codes {
		if !seen[c] {
			t.Errorf("fibp.yaml lacks error code 0x%02X %s", c, want.name)
		}
	}
}

func TestFIBPFraming(t *testing.T) {
	s := loadSpec(t, fibpYAML)
	f := s.Framing
	var header []string
	for _, h := range f.Header {
		header = append(header, h.Type+" "+h.Name)
	}
	// The seed: "a big-endian u32 length prefix ... a fixed 6-byte header: u8 opcode, u8 flags,
	// big-endian u32 request ID".
	if got := strings.Join(header, ", "); f.Length != "u32" || got != "opcode opcode, frame_flags flags, u32 request_id" {
		t.Errorf("fibp.yaml: length %q, header %s", f.Length, got)
	}
	if s.Protocol != "fibp" || f.MinFrame != 6 || f.MaxFrame != 16777216 ||
		f.Trailing != "ignore" || f.MapCount != "u16" || f.ArrayCount != "u16" {
		t.Errorf("fibp.yaml: protocol %q framing %+v", s.Protocol, f)
	}
}

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

// ---------------------------------------------------------------------------------------------
// Rift

var riftRow = regexp.MustCompile(`^\| (\d+) \| ([A-Z_]+) \| ([^|]*) \| ([^|]*) \|$`)

type riftOp struct {
	name, body, answer string
}

func riftTable(t *testing.T) map[int]riftOp {
	ops := map[int]riftOp{}
	f, err := os.Open(riftMD)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("source %s not present: the seed tables are test data kept in the repository", riftMD)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := riftRow.FindStringSubmatch(sc.Text()); m != nil {
			op, _ := strconv.Atoi(m[1])
			if _, dup := ops[op]; dup {
				t.Fatalf("rift.md lists opcode %d twice", op)
			}
			ops[op] = riftOp{name: m[2], body: strings.TrimSpace(m[3]), answer: strings.TrimSpace(m[4])}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ops
}

func normName(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

func TestRiftMatchesTable(t *testing.T) {
	ops := riftTable(t)
	s := loadSpec(t, riftYAML)

	if len(ops) != 15 {
		t.Errorf("rift.md opcode table has %d rows, want 15", len(ops))
	}
	if len(s.Frames) != 15 {
		t.Errorf("rift.yaml has %d frames, want 15", len(s.Frames))
	}
	f := s.Framing
	if s.Protocol != "rift" || f.Length != "u32" || len(f.Header) != 1 || f.Header[0].Type != "opcode" || f.MinFrame != 1 || f.MaxFrame != 1114112 || f.Trailing != "reject" {
		t.Errorf("rift.yaml: protocol %q framing %+v", s.Protocol, f)
	}

	// The table writes every string as str and the rest of the frame as payload.
	fl := &flattener{s: s, resolve: func(typ string) string {
		switch typ {
		case "str", "subject":
			return "str"
		}
		return typ
	}}
	seen := map[int]bool{}
	for i, fr := range s.Frames {
		if seen[fr.Opcode] {
			t.Errorf("rift.yaml: opcode %d appears twice", fr.Opcode)
		}
		seen[fr.Opcode] = true
		if i > 0 && s.Frames[i-1].Opcode >= fr.Opcode {
			t.Errorf("rift.yaml: opcode %d %s out of order", fr.Opcode, fr.Name)
		}
		want, ok := ops[fr.Opcode]
		if !ok {
			t.Errorf("rift.yaml: frame %s has opcode %d, not in rift.md", fr.Name, fr.Opcode)
			continue
		}
		if normName(fr.Name) != normName(want.name) {
			t.Errorf("opcode %d: name %q, rift.md says %q", fr.Opcode, fr.Name, want.name)
		}
		dir := "client"
		if strings.HasPrefix(want.answer, "server") {
			dir = "server"
		}
		if fr.Direction != dir {
			t.Errorf("opcode %d %s: direction %q, want %q (answer %q)", fr.Opcode, fr.Name, fr.Direction, dir, want.answer)
		}
		if fr.Group != "messaging" {
			t.Errorf("opcode %d %s: group %q, want messaging", fr.Opcode, fr.Name, fr.Group)
		}

		var wantTokens []token
		if want.body != "(empty)" {
			for _, part := range strings.Split(want.body, ",") {
				part = strings.TrimSpace(part)
				if part == "payload" {
					wantTokens = append(wantTokens, token{typ: "payload", name: "payload"})
					continue
				}
				name, typ, ok := strings.Cut(part, ":")
				if !ok {
					t.Fatalf("rift.md opcode %d: cannot parse body part %q", fr.Opcode, part)
				}
				wantTokens = append(wantTokens, token{typ: typ, name: name})
			}
		}
		got, err := fl.fields(fr.Fields)
		if err != nil {
			t.Errorf("opcode %d %s: %v", fr.Opcode, fr.Name, err)
			continue
		}
		if !sameTokens(got, wantTokens) {
			t.Errorf("opcode %d %s: layout differs\n yaml:    %v\n rift.md: %v", fr.Opcode, fr.Name, got, wantTokens)
		}
		for j, fd := range fr.Fields {
			if fd.Type == "payload" && j != len(fr.Fields)-1 {
				t.Errorf("opcode %d %s: payload is not the last field", fr.Opcode, fr.Name)
			}
		}
	}
	for op, want := range ops {
		if !seen[op] {
			t.Errorf("rift.yaml lacks opcode %d %s", op, want.name)
		}
	}
	checkDocs(t, "rift", s)
}

// ---------------------------------------------------------------------------------------------
// Names

var (
	snakeName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	camelName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

func camel(s string) string {
	if camelName.MatchString(s) {
		return s
	}
	parts := strings.Split(s, "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// TestNames checks the naming rules of spec/README.md and that the Go identifiers the generator
// derives (types, Op constants, enum, bit and string constants) do not collide.
func TestNames(t *testing.T) {
	for _, path := range []string{fibpYAML, riftYAML} {
		s := loadSpec(t, path)
		idents := map[string]string{}
		declare := func(ident, what string) {
			if prev, dup := idents[ident]; dup {
				t.Errorf("%s: Go identifier %s is both %s and %s", path, ident, prev, what)
			}
			idents[ident] = what
		}
		snake := func(name, what string) {
			if !snakeName.MatchString(name) {
				t.Errorf("%s: %s %q is not snake_case", path, what, name)
			}
		}
		var walk func(where string, fields []specField)
		walk = func(where string, fields []specField) {
			seen := map[string]bool{}
			for _, f := range fields {
				snake(f.Name, "field "+where+"."+f.Name)
				if seen[f.Name] {
					t.Errorf("%s: %s has two fields named %s", path, where, f.Name)
				}
				seen[f.Name] = true
				if f.Item != "" {
					snake(f.Item, "item")
					declare(camel(f.Item), "item of "+where+"."+f.Name)
				}
				if len(f.Fields) > 0 && (f.Item == "" || f.Count == "") {
					t.Errorf("%s: %s.%s has inline fields but no count and item", path, where, f.Name)
				}
				if f.Count != "" && (f.Item == "") == (f.Type == "") {
					t.Errorf("%s: %s.%s is counted and needs exactly one of item or type", path, where, f.Name)
				}
				walk(where+"."+f.Name, f.Fields)
			}
		}
		for _, e := range s.Enums {
			snake(e.Name, "enum")
			declare(camel(e.Name), "enum "+e.Name)
			values := map[int]bool{}
			for _, v := range e.Values {
				if values[v.Value] {
					t.Errorf("%s: enum %s repeats value %d", path, e.Name, v.Value)
				}
				values[v.Value] = true
				if e.Name != "error_code" {
					snake(v.Name, "value of enum "+e.Name)
				}
				declare(e.Prefix+camel(v.Name), "value of enum "+e.Name)
			}
		}
		for _, b := range s.Bitsets {
			declare(camel(b.Name), "bitset "+b.Name)
			for _, bit := range b.Bits {
				declare(b.Prefix+bit.Name, "bit of "+b.Name)
			}
		}
		for _, c := range s.Constants {
			for _, v := range c.Values {
				declare(c.Prefix+v.Name, "constant of "+c.Name)
			}
		}
		for _, r := range s.Records {
			snake(r.Name, "record")
			declare(camel(r.Name), "record "+r.Name)
			walk(r.Name, r.Fields)
		}
		for _, l := range s.Lists {
			snake(l.Name, "list")
			declare(camel(l.Name), "list "+l.Name)
		}
		for _, f := range s.Frames {
			if !camelName.MatchString(f.Name) {
				t.Errorf("%s: frame name %q is not CamelCase", path, f.Name)
			}
			declare(f.Name, "frame "+f.Name)
			declare("Op"+f.Name, "opcode constant of "+f.Name)
			walk(f.Name, f.Fields)
		}
	}
}
