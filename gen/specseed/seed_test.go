// Package specseed checks the protocol descriptions in spec/ against the source documents they were
// written from: the opcode tables, the error code table and the frame layouts.
package specseed

import (
	"bytes"
	"errors"
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
