package specseed

import (
	"regexp"
	"strings"
	"testing"
)

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
