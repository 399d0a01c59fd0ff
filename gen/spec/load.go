package spec

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem found in a spec file.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Errors is every problem found in a spec file, in line order.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads and parses the spec file at path.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Parse parses a spec. file names the source in error messages. The error, when not nil, is an
// Errors value listing every problem found.
//
// A spec's import: entries are read from disk, relative to file.
func Parse(file string, data []byte) (*Spec, error) {
	return parse(file, data, map[string]bool{})
}

// parse parses a spec; loading holds the files being parsed, so that an import cycle is refused.
func parse(file string, data []byte, loading map[string]bool) (*Spec, error) {
	if abs, err := filepath.Abs(file); err == nil {
		loading[abs] = true
	}
	var raw rawSpec
	if err := yaml.Unmarshal(data, &raw); err != nil {
		var es Errors
		msgs := []string{err.Error()}
		if te, ok := err.(*yaml.TypeError); ok {
			msgs = te.Errors
		}
		for _, m := range msgs {
			if g := yamlLine.FindStringSubmatch(m); g != nil {
				line, _ := strconv.Atoi(g[1])
				es = append(es, Error{file, line, g[2]})
			} else {
				es = append(es, Error{file, 1, m})
			}
		}
		return nil, es
	}
	b := &builder{
		loading: loading,
		file:    file,
		spec:    &Spec{File: file},
		names:   map[string]int{},
		scalars: map[string]*Scalar{},
		enums:   map[string]*Enum{},
		bitsets: map[string]*Bitset{},
		records: map[string]*Record{},
		lists:   map[string]*List{},
	}
	b.build(&raw)
	if len(b.errs) > 0 {
		sort.SliceStable(b.errs, func(i, j int) bool { return b.errs[i].Line < b.errs[j].Line })
		return nil, b.errs
	}
	return b.spec, nil
}

type builder struct {
	loading map[string]bool
	file    string
	spec    *Spec
	errs    Errors

	names   map[string]int // every named type, to the line that declared it
	scalars map[string]*Scalar
	enums   map[string]*Enum
	bitsets map[string]*Bitset
	records map[string]*Record
	lists   map[string]*List
}

func (b *builder) errf(line int, format string, args ...any) {
	b.errs = append(b.errs, Error{b.file, line, fmt.Sprintf(format, args...)})
}

var (
	snakeName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	camelName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	goPrefix  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

// declare registers a type name, reporting duplicates.
func (b *builder) declare(name string, line int, what string) bool {
	if !snakeName.MatchString(name) {
		b.errf(line, "%s name %q must be snake_case", what, name)
		return false
	}
	if prev, dup := b.names[name]; dup {
		b.errf(line, "%s %q already declared on line %d", what, name, prev)
		return false
	}
	b.names[name] = line
	return true
}

func (b *builder) build(raw *rawSpec) {
	s := b.spec
	s.Protocol, s.Title, s.Version, s.Doc = raw.Protocol, raw.Title, raw.Version, raw.Doc
	if !regexp.MustCompile(`^[a-z][a-z0-9]*$`).MatchString(raw.Protocol) {
		b.errf(1, "protocol %q must be a lower-case Go package name", raw.Protocol)
	}
	if raw.Version < 1 {
		b.errf(1, "version must be at least 1")
	}
	for i := range raw.Import {
		b.imports(&raw.Import[i])
	}
	for i := range raw.Types {
		b.scalar(&raw.Types[i])
	}
	for _, sc := range s.Scalars { // length prefixes may name scalars declared later
		b.resolveLength(sc, raw)
	}
	b.framing(&raw.Framing)
	for i := range raw.Enums {
		b.enum(&raw.Enums[i])
	}
	for i := range raw.Bitsets {
		b.bitset(&raw.Bitsets[i])
	}
	b.header(&raw.Framing)
	for i := range raw.Constants {
		b.constGroup(&raw.Constants[i])
	}
	// Records and lists may refer to each other in any order: declare all names first.
	for i := range raw.Records {
		r := &raw.Records[i]
		if r.Opcode == nil && (r.Group != "" || len(r.Examples) > 0) {
			b.errf(r.Line, "record %q: group and examples are for tagged records (with an opcode)", r.Name)
		}
		if b.declare(r.Name, r.Line, "record") && r.Opcode == nil {
			rec := &Record{Name: r.Name, Doc: r.Doc, Line: r.Line}
			b.records[r.Name] = rec
			s.Records = append(s.Records, rec)
		}
	}
	for i := range raw.Lists {
		l := &raw.Lists[i]
		if b.declare(l.Name, l.Line, "list") {
			list := &List{Name: l.Name, Doc: l.Doc, Line: l.Line}
			b.lists[l.Name] = list
			s.Lists = append(s.Lists, list)
		}
	}
	for i := range raw.Records {
		r := &raw.Records[i]
		if rec := b.records[r.Name]; rec != nil && rec.Line == r.Line {
			rec.Fields = b.fields(r.Fields, r.Name, r.Line)
		}
	}
	for i := range raw.Lists {
		b.list(&raw.Lists[i])
	}
	for i := range raw.Frames {
		b.frame(&raw.Frames[i], FrameMessage)
	}
	for i := range raw.Records {
		if r := &raw.Records[i]; r.Opcode != nil && snakeName.MatchString(r.Name) {
			group := r.Group
			if group == "" {
				group = "records"
			}
			b.frame(&rawFrame{Opcode: r.Opcode, Name: GoName(r.Name), Group: group, Doc: r.Doc, Fields: r.Fields, Examples: r.Examples, Line: r.Line}, FrameRecord)
		}
	}
}

// imports loads an imported spec and makes its enums and untagged records known as
// <protocol>.<name> (when it names the spec's Go package) and declares the enums listed in copy: as this spec's own.
func (b *builder) imports(r *rawImport) {
	path := filepath.Join(filepath.Dir(b.file), r.Spec)
	if r.Spec == "" || (r.Go == "" && len(r.Copy) == 0) {
		b.errf(r.Line, "import: needs spec (a path) and go (its package's import path) or copy (enums to declare here)")
		return
	}
	abs, _ := filepath.Abs(path)
	if b.loading[abs] {
		b.errf(r.Line, "import: %s imports itself", r.Spec)
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.errf(r.Line, "import: %v", err)
		return
	}
	b.loading[abs] = true
	defer delete(b.loading, abs)
	s, err := parse(path, data, b.loading)
	if err != nil {
		b.errf(r.Line, "import %s: %v", r.Spec, err)
		return
	}
	for _, name := range r.Copy {
		b.copyEnum(s, r, name)
	}
	if r.Go == "" {
		return
	}
	imp := &Import{Spec: s, Go: r.Go, Line: r.Line}
	b.spec.Imports = append(b.spec.Imports, imp)
	for _, en := range s.Enums {
		if en.From == nil { // only its own: imports are not re-exported
			cp := *en
			cp.From = imp
			b.enums[s.Protocol+"."+en.Name] = &cp
		}
	}
	for _, rec := range s.Records {
		if rec.From == nil && !rec.Inline {
			cp := *rec
			cp.From = imp
			b.records[s.Protocol+"."+rec.Name] = &cp
		}
	}
}

// copyEnum declares the imported spec's own enum name as an enum of this spec.
func (b *builder) copyEnum(s *Spec, r *rawImport, name string) {
	for _, en := range s.Enums {
		if en.Name == name && en.From == nil {
			if !b.declare(name, r.Line, "enum") {
				return
			}
			cp := *en
			cp.CopiedFrom = r.Spec
			b.enums[name] = &cp
			b.spec.Enums = append(b.spec.Enums, &cp)
			return
		}
	}
	b.errf(r.Line, "import %s: copy: no enum %q declared there", r.Spec, name)
}

func (b *builder) scalar(r *rawScalar) {
	if !b.declare(r.Name, r.Line, "type") {
		return
	}
	kind := scalarKindNames[r.Kind]
	sc := &Scalar{Name: r.Name, Kind: kind, Size: r.Size, Signed: r.Signed, Max: r.Max, UTF8: r.UTF8, Rest: r.Rest, Line: r.Line}
	switch kind {
	case KindInt:
		if r.Size != 1 && r.Size != 2 && r.Size != 4 && r.Size != 8 {
			b.errf(r.Line, "type %q: int size must be 1, 2, 4 or 8, not %d", r.Name, r.Size)
		}
		if r.Signed && r.Size != 8 {
			b.errf(r.Line, "type %q: only 8-byte signed integers are supported", r.Name)
		}
	case KindFloat:
		sc.Size = 8
	case KindBool:
		sc.Size = 1
	case KindUUID:
		sc.Size = 16
	case KindString, KindBytes:
		if r.Rest && kind == KindString {
			b.errf(r.Line, "type %q: only bytes may take the rest of the frame", r.Name)
		}
		if !r.Rest && r.Length == "" {
			b.errf(r.Line, "type %q: %s needs a length prefix type (length: u16 or u32) or rest: true", r.Name, r.Kind)
		}
		if r.Rest && r.Length != "" {
			b.errf(r.Line, "type %q: rest and length are exclusive", r.Name)
		}
		if r.Max < 0 {
			b.errf(r.Line, "type %q: max must not be negative", r.Name)
		}
	default:
		b.errf(r.Line, "type %q: unknown kind %q (want int, float, bool, uuid, string or bytes)", r.Name, r.Kind)
	}
	b.scalars[r.Name] = sc
	b.spec.Scalars = append(b.spec.Scalars, sc)
}

func (b *builder) resolveLength(sc *Scalar, raw *rawSpec) {
	var r *rawScalar
	for i := range raw.Types {
		if raw.Types[i].Name == sc.Name {
			r = &raw.Types[i]
		}
	}
	if r == nil || r.Length == "" || (sc.Kind != KindString && sc.Kind != KindBytes) {
		if sc.Rest && sc.Max == 0 {
			sc.Max = 1<<31 - 1
		}
		return
	}
	l := b.intScalar(r.Length, r.Line, "length prefix of "+sc.Name)
	if l == nil {
		return
	}
	if l.Size != 2 && l.Size != 4 {
		b.errf(r.Line, "type %q: length prefix must be a 2- or 4-byte integer", sc.Name)
		return
	}
	sc.Length = l
	limit := 1<<(8*l.Size) - 1
	if l.Size == 4 {
		limit = 1<<31 - 1 // what an int can index on every platform
	}
	if sc.Max == 0 {
		sc.Max = limit
	} else if sc.Max > limit {
		b.errf(r.Line, "type %q: max %d does not fit a %s prefix", sc.Name, sc.Max, l.Name)
	}
}

// intScalar resolves name to an unsigned integer scalar.
func (b *builder) intScalar(name string, line int, what string) *Scalar {
	sc := b.scalars[name]
	if sc == nil || sc.Kind != KindInt || sc.Signed {
		b.errf(line, "%s: %q is not an unsigned integer type", what, name)
		return nil
	}
	return sc
}

func (b *builder) framing(r *rawFraming) {
	f := &b.spec.Framing
	f.MinFrame, f.MaxFrame, f.Line = r.MinFrame, r.MaxFrame, r.Line
	f.Trailing = trailingNames[r.Trailing]
	if r.Length == "" {
		b.errf(r.Line, "framing: no length (the length prefix's type, e.g. u32)")
	} else {
		f.Length = b.intScalar(r.Length, r.Line, "framing.length")
	}
	if f.Trailing == 0 {
		b.errf(r.Line, "framing: trailing must be ignore or reject, not %q", r.Trailing)
	}
	if r.MaxFrame <= 0 || r.MinFrame < 0 || r.MinFrame > r.MaxFrame {
		b.errf(r.Line, "framing: need 0 <= min_frame <= max_frame and max_frame > 0")
	}
	if r.MapCount != "" {
		f.MapCount = b.intScalar(r.MapCount, r.Line, "framing.map_count")
	}
	if r.ArrayCount != "" {
		f.ArrayCount = b.intScalar(r.ArrayCount, r.Line, "framing.array_count")
	}
}

// header resolves the framing header: fixed-size integer fields (scalars, enums, bit sets) and
// exactly one field of the built-in type opcode. It runs once enums and bit sets are known.
func (b *builder) header(r *rawFraming) {
	f := &b.spec.Framing
	opcodes := 0
	seen := map[string]int{}
	for i := range r.Header {
		h := &r.Header[i]
		if !snakeName.MatchString(h.Name) {
			b.errf(h.Line, "framing.header: field name %q must be snake_case", h.Name)
			continue
		}
		if prev, dup := seen[h.Name]; dup {
			b.errf(h.Line, "framing.header: duplicate field %q (first on line %d)", h.Name, prev)
			continue
		}
		seen[h.Name] = h.Line
		if h.Count != "" || h.Item != "" || len(h.Fields) > 0 {
			b.errf(h.Line, "framing.header.%s: header fields are single fixed-size values", h.Name)
			continue
		}
		var t *Type
		if h.Type == "opcode" {
			t = &Type{Kind: TOpcode}
			opcodes++
		} else if t = b.typeRef(h.Type, h.Line, "framing.header."+h.Name); t == nil {
			continue
		}
		if t.Width() == 0 || t.Kind == TScalar && t.Scalar.Signed {
			b.errf(h.Line, "framing.header.%s: %s is not an unsigned integer, enum, bit set or opcode", h.Name, h.Type)
			continue
		}
		f.Header = append(f.Header, &Field{Name: h.Name, Doc: h.Doc, Type: t, Line: h.Line})
	}
	if opcodes != 1 {
		b.errf(r.Line, "framing.header: needs exactly one field of type opcode, has %d", opcodes)
	}
}

func (b *builder) enum(r *rawEnum) {
	if !b.declare(r.Name, r.Line, "enum") {
		return
	}
	e := &Enum{Name: r.Name, Prefix: r.Prefix, Doc: r.Doc, Line: r.Line}
	e.Type = b.intScalar(r.Type, r.Line, "enum "+r.Name)
	if !goPrefix.MatchString(r.Prefix) {
		b.errf(r.Line, "enum %q: prefix %q must be an exported Go identifier", r.Name, r.Prefix)
	}
	if len(r.Values) == 0 {
		b.errf(r.Line, "enum %q has no values", r.Name)
	}
	seenV, seenN := map[uint64]int{}, map[string]int{}
	for _, v := range r.Values {
		if v.Value == nil {
			b.errf(v.Line, "enum %q: value %q has no value", r.Name, v.Name)
			continue
		}
		if !snakeName.MatchString(v.Name) && !camelName.MatchString(v.Name) {
			b.errf(v.Line, "enum %q: bad value name %q", r.Name, v.Name)
		}
		if prev, dup := seenV[*v.Value]; dup {
			b.errf(v.Line, "enum %q: value %#x already used on line %d", r.Name, *v.Value, prev)
		}
		key := GoName(v.Name)
		if prev, dup := seenN[key]; dup {
			b.errf(v.Line, "enum %q: name %q already used on line %d", r.Name, v.Name, prev)
		}
		seenV[*v.Value], seenN[key] = v.Line, v.Line
		if e.Type != nil && e.Type.Size < 8 && *v.Value >= 1<<(8*e.Type.Size) {
			b.errf(v.Line, "enum %q: value %#x does not fit %s", r.Name, *v.Value, e.Type.Name)
		}
		e.Values = append(e.Values, EnumValue{Value: *v.Value, Name: v.Name, Doc: v.Doc, Line: v.Line})
	}
	b.enums[r.Name] = e
	b.spec.Enums = append(b.spec.Enums, e)
}

func (b *builder) bitset(r *rawBitset) {
	if !b.declare(r.Name, r.Line, "bitset") {
		return
	}
	bs := &Bitset{Name: r.Name, Prefix: r.Prefix, Doc: r.Doc, Line: r.Line}
	bs.Type = b.intScalar(r.Type, r.Line, "bitset "+r.Name)
	if !goPrefix.MatchString(r.Prefix) {
		b.errf(r.Line, "bitset %q: prefix %q must be an exported Go identifier", r.Name, r.Prefix)
	}
	seen := map[int]int{}
	for _, bit := range r.Bits {
		if bit.Bit == nil {
			b.errf(bit.Line, "bitset %q: %q has no bit number", r.Name, bit.Name)
			continue
		}
		if prev, dup := seen[*bit.Bit]; dup {
			b.errf(bit.Line, "bitset %q: bit %d already used on line %d", r.Name, *bit.Bit, prev)
		}
		seen[*bit.Bit] = bit.Line
		if bs.Type != nil && (*bit.Bit < 0 || *bit.Bit >= 8*bs.Type.Size) {
			b.errf(bit.Line, "bitset %q: bit %d does not fit %s", r.Name, *bit.Bit, bs.Type.Name)
		}
		bs.Bits = append(bs.Bits, Bit{Bit: *bit.Bit, Name: bit.Name, Doc: bit.Doc, Line: bit.Line})
	}
	b.bitsets[r.Name] = bs
	b.spec.Bitsets = append(b.spec.Bitsets, bs)
}

func (b *builder) constGroup(r *rawConstGroup) {
	if !b.declare(r.Name, r.Line, "constant group") {
		return
	}
	if !goPrefix.MatchString(r.Prefix) {
		b.errf(r.Line, "constants %q: prefix %q must be an exported Go identifier", r.Name, r.Prefix)
	}
	g := &ConstGroup{Name: r.Name, Prefix: r.Prefix, Doc: r.Doc, Line: r.Line}
	seen := map[string]int{}
	for _, c := range r.Values {
		if prev, dup := seen[c.Name]; dup {
			b.errf(c.Line, "constants %q: %q already declared on line %d", r.Name, c.Name, prev)
		}
		seen[c.Name] = c.Line
		g.Values = append(g.Values, Const{Name: c.Name, Value: c.Value, Doc: c.Doc, Line: c.Line})
	}
	b.spec.Constants = append(b.spec.Constants, g)
}

func (b *builder) list(r *rawList) {
	list := b.lists[r.Name]
	if list == nil || list.Line != r.Line {
		return
	}
	list.Count = b.intScalar(r.Count, r.Line, "list "+r.Name+" count")
	list.Item = b.records[r.Item]
	if list.Item == nil {
		b.errf(r.Line, "list %q: item %q is not a record", r.Name, r.Item)
	}
}

var (
	optionalRE = regexp.MustCompile(`^optional<\s*(.+?)\s*>$`)
	mapRE      = regexp.MustCompile(`^map<\s*([^,\s]+)\s*,\s*([^>\s]+)\s*>$`)
	arrayRE    = regexp.MustCompile(`^(.+)\[\]$`)
)

// typeRef resolves a type expression used by a field.
func (b *builder) typeRef(expr string, line int, where string) *Type {
	expr = strings.TrimSpace(expr)
	if g := optionalRE.FindStringSubmatch(expr); g != nil {
		elem := b.typeRef(g[1], line, where)
		if elem == nil {
			return nil
		}
		if elem.Kind == TOptional || (elem.Kind == TScalar && elem.Scalar.Rest) {
			b.errf(line, "%s: optional<%s> is not allowed", where, g[1])
			return nil
		}
		return &Type{Kind: TOptional, Elem: elem}
	}
	if g := mapRE.FindStringSubmatch(expr); g != nil {
		k, v := b.typeRef(g[1], line, where), b.typeRef(g[2], line, where)
		if k == nil || v == nil {
			return nil
		}
		for _, t := range []*Type{k, v} {
			if t.Kind != TScalar && t.Kind != TEnum || (t.Kind == TScalar && t.Scalar.Rest) {
				b.errf(line, "%s: map keys and values must be scalars or enums", where)
				return nil
			}
		}
		if b.spec.Framing.MapCount == nil {
			b.errf(line, "%s: a map needs framing.map_count", where)
			return nil
		}
		return &Type{Kind: TMap, Key: k, Elem: v, Count: b.spec.Framing.MapCount}
	}
	if g := arrayRE.FindStringSubmatch(expr); g != nil {
		elem := b.typeRef(g[1], line, where)
		if elem == nil {
			return nil
		}
		if elem.Kind == TScalar && elem.Scalar.Rest {
			b.errf(line, "%s: an array of rest-of-frame bytes is not allowed", where)
			return nil
		}
		if b.spec.Framing.ArrayCount == nil {
			b.errf(line, "%s: an array needs framing.array_count", where)
			return nil
		}
		return &Type{Kind: TArray, Elem: elem, Count: b.spec.Framing.ArrayCount}
	}
	switch {
	case b.scalars[expr] != nil:
		return &Type{Kind: TScalar, Scalar: b.scalars[expr]}
	case b.enums[expr] != nil:
		return &Type{Kind: TEnum, Enum: b.enums[expr]}
	case b.bitsets[expr] != nil:
		return &Type{Kind: TBitset, Bitset: b.bitsets[expr]}
	case b.records[expr] != nil:
		return &Type{Kind: TRecord, Record: b.records[expr]}
	case b.lists[expr] != nil:
		return &Type{Kind: TList, List: b.lists[expr]}
	}
	b.errf(line, "%s: unknown type %q", where, expr)
	return nil
}

// fields resolves the fields of a frame or record. owner names it in messages.
func (b *builder) fields(raw []rawField, owner string, ownerLine int) []*Field {
	var out []*Field
	seen := map[string]int{}
	for i := range raw {
		rf := &raw[i]
		where := fmt.Sprintf("%s.%s", owner, rf.Name)
		if !snakeName.MatchString(rf.Name) {
			b.errf(rf.Line, "%s: field name %q must be snake_case", owner, rf.Name)
			continue
		}
		if prev, dup := seen[GoName(rf.Name)]; dup {
			b.errf(rf.Line, "%s: duplicate field %q (first on line %d)", owner, rf.Name, prev)
			continue
		}
		seen[GoName(rf.Name)] = rf.Line
		t := b.fieldType(rf, where)
		if t == nil {
			continue
		}
		out = append(out, &Field{Name: rf.Name, Doc: rf.Doc, Type: t, Line: rf.Line})
	}
	return out
}

func (b *builder) fieldType(rf *rawField, where string) *Type {
	switch {
	case rf.Count == "" && rf.Item != "":
		b.errf(rf.Line, "%s: item without count", where)
	case rf.Count == "" && len(rf.Fields) > 0:
		b.errf(rf.Line, "%s: fields without count (a repeated group needs count and item)", where)
	case rf.Count == "" && rf.Type == "":
		b.errf(rf.Line, "%s: no type", where)
	case rf.Count == "":
		return b.typeRef(rf.Type, rf.Line, where)
	case rf.Type != "" && (rf.Item != "" || len(rf.Fields) > 0):
		b.errf(rf.Line, "%s: a repeated group has either type or item with fields, not both", where)
	case rf.Type != "":
		count := b.intScalar(rf.Count, rf.Line, where+" count")
		elem := b.typeRef(rf.Type, rf.Line, where)
		if count == nil || elem == nil {
			return nil
		}
		if elem.Kind == TScalar && elem.Scalar.Rest {
			b.errf(rf.Line, "%s: cannot repeat rest-of-frame bytes", where)
			return nil
		}
		return &Type{Kind: TRepeated, Elem: elem, Count: count}
	case rf.Item == "":
		b.errf(rf.Line, "%s: a repeated group needs item (the element's name)", where)
	case len(rf.Fields) == 0:
		b.errf(rf.Line, "%s: repeated group %q has no fields", where, rf.Item)
	default:
		count := b.intScalar(rf.Count, rf.Line, where+" count")
		if !b.declare(rf.Item, rf.Line, "item") || count == nil {
			return nil
		}
		rec := &Record{Name: rf.Item, Doc: rf.Doc, Inline: true, Line: rf.Line}
		b.records[rf.Item] = rec
		b.spec.Records = append(b.spec.Records, rec)
		rec.Fields = b.fields(rf.Fields, rf.Item, rf.Line)
		return &Type{Kind: TRepeated, Elem: &Type{Kind: TRecord, Record: rec}, Count: count}
	}
	return nil
}

func (b *builder) frame(r *rawFrame, kind FrameKind) {
	if r.Opcode == nil {
		b.errf(r.Line, "frame %q has no opcode", r.Name)
		return
	}
	if !camelName.MatchString(r.Name) {
		b.errf(r.Line, "frame name %q must be CamelCase", r.Name)
		return
	}
	for _, f := range b.spec.Frames {
		if f.Opcode == *r.Opcode {
			b.errf(r.Line, "frame %s: opcode %#02x already used by %s on line %d", r.Name, *r.Opcode, f.Name, f.Line)
			return
		}
		if f.Name == r.Name {
			b.errf(r.Line, "frame %s already declared on line %d", r.Name, f.Line)
			return
		}
	}
	if *r.Opcode < 0 || *r.Opcode > 255 {
		b.errf(r.Line, "frame %s: opcode %d does not fit a byte", r.Name, *r.Opcode)
	}
	dir := directionNames[r.Direction]
	if dir == 0 && kind == FrameMessage {
		b.errf(r.Line, "frame %s: direction must be client, server or both, not %q", r.Name, r.Direction)
	}
	if !snakeName.MatchString(r.Group) {
		b.errf(r.Line, "frame %s: group %q must be a snake_case word", r.Name, r.Group)
	}
	f := &Frame{Opcode: *r.Opcode, Name: GoName(r.Name), SpecName: r.Name, Kind: kind, Direction: dir, Group: r.Group, MaxBody: r.MaxBody, Doc: r.Doc, Line: r.Line}
	f.Fields = b.fields(r.Fields, r.Name, r.Line)
	f.Examples = b.examples(r.Examples, r.Name)
	b.spec.Frames = append(b.spec.Frames, f)
}

var exampleName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// examples reads a frame's examples: kebab-case names unique within the frame, valid hex.
func (b *builder) examples(raw []rawExample, frame string) []*Example {
	var out []*Example
	seen := map[string]int{}
	for i := range raw {
		r := &raw[i]
		if !exampleName.MatchString(r.Name) {
			b.errf(r.Line, "frame %s: example name %q must be kebab-case", frame, r.Name)
			continue
		}
		if prev, dup := seen[r.Name]; dup {
			b.errf(r.Line, "frame %s: example %q already declared on line %d", frame, r.Name, prev)
			continue
		}
		seen[r.Name] = r.Line
		var digits strings.Builder
		for _, l := range r.Hex {
			if i := strings.IndexByte(l, '#'); i >= 0 {
				l = l[:i]
			}
			digits.WriteString(strings.Join(strings.Fields(l), ""))
		}
		data, err := hex.DecodeString(digits.String())
		if err != nil {
			b.errf(r.Line, "frame %s: example %s: %v", frame, r.Name, err)
			continue
		}
		out = append(out, &Example{Name: r.Name, Doc: r.Doc, Hex: r.Hex, Bytes: data, Line: r.Line})
	}
	return out
}
