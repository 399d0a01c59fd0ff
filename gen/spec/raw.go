package spec

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// The raw* types mirror the YAML one to one. Each remembers the line it started on.

type rawSpec struct {
	Import    []rawImport     `yaml:"import"`
	Protocol  string          `yaml:"protocol"`
	Title     string          `yaml:"title"`
	Version   int             `yaml:"version"`
	Doc       string          `yaml:"doc"`
	Framing   rawFraming      `yaml:"framing"`
	Types     []rawScalar     `yaml:"types"`
	Enums     []rawEnum       `yaml:"enums"`
	Bitsets   []rawBitset     `yaml:"bitsets"`
	Constants []rawConstGroup `yaml:"constants"`
	Records   []rawRecord     `yaml:"records"`
	Lists     []rawList       `yaml:"lists"`
	Frames    []rawFrame      `yaml:"frames"`
}

type rawImport struct {
	Spec string `yaml:"spec"` // path relative to the importing spec
	Go   string `yaml:"go"`   // the Go import path of the imported spec's generated package
	// Copy names imported enums to declare in this spec's own package, from their one
	// definition in the imported spec, so that the importing package need not import the other.
	Copy []string `yaml:"copy"`
	Doc  string   `yaml:"doc"`
	Line int      `yaml:"-"`
}

type rawFraming struct {
	Length     string     `yaml:"length"`
	Header     []rawField `yaml:"header"`
	MinFrame   int        `yaml:"min_frame"`
	MaxFrame   int        `yaml:"max_frame"`
	Trailing   string     `yaml:"trailing"`
	MapCount   string     `yaml:"map_count"`
	ArrayCount string     `yaml:"array_count"`
	Line       int        `yaml:"-"`
}

type rawScalar struct {
	Name   string `yaml:"name"`
	Kind   string `yaml:"kind"`
	Size   int    `yaml:"size"`
	Signed bool   `yaml:"signed"`
	Length string `yaml:"length"`
	Max    int    `yaml:"max"`
	UTF8   bool   `yaml:"utf8"`
	Rest   bool   `yaml:"rest"`
	Doc    string `yaml:"doc"`
	Line   int    `yaml:"-"`
}

type rawEnum struct {
	Name   string         `yaml:"name"`
	Type   string         `yaml:"type"`
	Prefix string         `yaml:"prefix"`
	Doc    string         `yaml:"doc"`
	Values []rawEnumValue `yaml:"values"`
	Line   int            `yaml:"-"`
}

type rawEnumValue struct {
	Value *uint64 `yaml:"value"`
	Name  string  `yaml:"name"`
	Doc   string  `yaml:"doc"`
	Line  int     `yaml:"-"`
}

type rawBitset struct {
	Name   string   `yaml:"name"`
	Type   string   `yaml:"type"`
	Prefix string   `yaml:"prefix"`
	Doc    string   `yaml:"doc"`
	Bits   []rawBit `yaml:"bits"`
	Line   int      `yaml:"-"`
}

type rawBit struct {
	Bit  *int   `yaml:"bit"`
	Name string `yaml:"name"`
	Doc  string `yaml:"doc"`
	Line int    `yaml:"-"`
}

type rawConstGroup struct {
	Name   string     `yaml:"name"`
	Prefix string     `yaml:"prefix"`
	Doc    string     `yaml:"doc"`
	Values []rawConst `yaml:"values"`
	Line   int        `yaml:"-"`
}

type rawConst struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
	Doc   string `yaml:"doc"`
	Line  int    `yaml:"-"`
}

type rawRecord struct {
	Opcode   *int         `yaml:"opcode"`   // a tagged record: a stored value that starts with its opcode
	Group    string       `yaml:"group"`    // tagged records: the emitted file (default records)
	Examples []rawExample `yaml:"examples"` // tagged records only
	Name     string       `yaml:"name"`
	Doc      string       `yaml:"doc"`
	Fields   []rawField   `yaml:"fields"`
	Line     int          `yaml:"-"`
}

type rawList struct {
	Name  string `yaml:"name"`
	Item  string `yaml:"item"`
	Count string `yaml:"count"`
	Doc   string `yaml:"doc"`
	Line  int    `yaml:"-"`
}

type rawFrame struct {
	Opcode    *int         `yaml:"opcode"`
	Name      string       `yaml:"name"`
	Direction string       `yaml:"direction"`
	Group     string       `yaml:"group"`
	MaxBody   int          `yaml:"max_body"`
	Doc       string       `yaml:"doc"`
	Fields    []rawField   `yaml:"fields"`
	Examples  []rawExample `yaml:"examples"`
	Line      int          `yaml:"-"`
}

type rawExample struct {
	Name string   `yaml:"name"`
	Doc  string   `yaml:"doc"`
	Hex  []string `yaml:"hex"` // lines of hex bytes (spaces ignored), each with a # comment
	Line int      `yaml:"-"`
}

type rawField struct {
	Name   string     `yaml:"name"`
	Type   string     `yaml:"type"`
	Count  string     `yaml:"count"`
	Item   string     `yaml:"item"`
	Doc    string     `yaml:"doc"`
	Fields []rawField `yaml:"fields"`
	Line   int        `yaml:"-"`
}

// Each raw type decodes strictly (unknown keys are errors) and records its line.

func (v *rawSpec) UnmarshalYAML(n *yaml.Node) error       { return strict(n, v) }
func (v *rawFraming) UnmarshalYAML(n *yaml.Node) error    { return strict(n, v) }
func (v *rawImport) UnmarshalYAML(n *yaml.Node) error     { return strict(n, v) }
func (v *rawScalar) UnmarshalYAML(n *yaml.Node) error     { return strict(n, v) }
func (v *rawEnum) UnmarshalYAML(n *yaml.Node) error       { return strict(n, v) }
func (v *rawEnumValue) UnmarshalYAML(n *yaml.Node) error  { return strict(n, v) }
func (v *rawBitset) UnmarshalYAML(n *yaml.Node) error     { return strict(n, v) }
func (v *rawBit) UnmarshalYAML(n *yaml.Node) error        { return strict(n, v) }
func (v *rawConstGroup) UnmarshalYAML(n *yaml.Node) error { return strict(n, v) }
func (v *rawConst) UnmarshalYAML(n *yaml.Node) error      { return strict(n, v) }
func (v *rawRecord) UnmarshalYAML(n *yaml.Node) error     { return strict(n, v) }
func (v *rawList) UnmarshalYAML(n *yaml.Node) error       { return strict(n, v) }
func (v *rawFrame) UnmarshalYAML(n *yaml.Node) error      { return strict(n, v) }
func (v *rawField) UnmarshalYAML(n *yaml.Node) error      { return strict(n, v) }
func (v *rawExample) UnmarshalYAML(n *yaml.Node) error    { return strict(n, v) }

// strict decodes mapping node n into the struct v points to, refusing keys that match no yaml tag
// and setting the struct's Line field to the node's line.
func strict(n *yaml.Node, v any) error {
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: expected a mapping", n.Line)}}
	}
	rv := reflect.ValueOf(v).Elem()
	rt := rv.Type()
	known := map[string]int{}
	for i := 0; i < rt.NumField(); i++ {
		tag := strings.Split(rt.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			known[tag] = i
		}
	}
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		idx, ok := known[key.Value]
		if !ok {
			errs = append(errs, fmt.Sprintf("line %d: unknown key %q", key.Line, key.Value))
			continue
		}
		if err := val.Decode(rv.Field(idx).Addr().Interface()); err != nil {
			if te, ok := err.(*yaml.TypeError); ok {
				errs = append(errs, te.Errors...)
			} else {
				errs = append(errs, fmt.Sprintf("line %d: %v", val.Line, err))
			}
		}
	}
	if f := rv.FieldByName("Line"); f.IsValid() {
		f.SetInt(int64(n.Line))
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}
