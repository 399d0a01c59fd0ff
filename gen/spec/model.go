// Package spec loads a protocol description (spec/*.yaml) into a validated, resolved model.
//
// Loading is two steps: Parse turns YAML into the model, keeping the line of every element, and
// resolves every type reference; it reports every problem at once, each as "file:line: message".
// The model is plain data with no behaviour beyond small queries; the emitter in gen/emit reads it.
package spec

import "fmt"

// Spec is one protocol.
type Spec struct {
	File     string // path the spec was read from, for error messages and generated headers
	Protocol string // Go package name
	Title    string
	Version  int
	Doc      string
	Framing  Framing
	Imports  []*Import // specs whose enums and records this one uses, as <protocol>.<name>

	Scalars   []*Scalar
	Enums     []*Enum
	Bitsets   []*Bitset
	Constants []*ConstGroup
	Records   []*Record // named records, then the inline records of repeated groups (not tagged records: those are Frames)
	Lists     []*List
	Frames    []*Frame
}

// Framing describes how frames are delimited: a length prefix, then a fixed-size header that holds
// the opcode and whatever else the protocol puts in front of every body, then the body.
type Framing struct {
	Length     *Scalar  // the length prefix: an unsigned integer counting header and body bytes
	Header     []*Field // the header's fields, in wire order; exactly one is of type opcode
	MinFrame   int
	MaxFrame   int
	Trailing   Trailing
	MapCount   *Scalar
	ArrayCount *Scalar
	Line       int
}

// RejectTrailing reports whether decoders must fail on bytes left after the last field.
func (f Framing) RejectTrailing() bool { return f.Trailing == TrailingReject }

// HeaderSize is the header's size in bytes.
func (f Framing) HeaderSize() int {
	n := 0
	for _, h := range f.Header {
		n += h.Type.Width()
	}
	return n
}

// OpcodeOnly reports whether the header is nothing but the opcode.
func (f Framing) OpcodeOnly() bool { return len(f.Header) == 1 && f.Header[0].Type.Kind == TOpcode }

// Trailing says what a decoder does with bytes after the last field it knows.
type Trailing uint8

// The trailing-byte policies.
const (
	TrailingIgnore Trailing = iota + 1 // schema evolution by appending
	TrailingReject                     // bytes after the last field are an error
)

var trailingNames = map[string]Trailing{"ignore": TrailingIgnore, "reject": TrailingReject}

func (t Trailing) String() string { return nameOf(trailingNames, t) }

// Direction says which peer sends a frame.
type Direction uint8

// The directions.
const (
	DirClient Direction = iota + 1 // client → server
	DirServer                      // server → client
	DirBoth                        // either direction
)

var directionNames = map[string]Direction{"client": DirClient, "server": DirServer, "both": DirBoth}

func (d Direction) String() string { return nameOf(directionNames, d) }

// ScalarKind is the kind of a named primitive.
type ScalarKind uint8

// The scalar kinds.
const (
	KindInt ScalarKind = iota + 1
	KindFloat
	KindBool
	KindUUID
	KindString
	KindBytes
)

var scalarKindNames = map[string]ScalarKind{
	"int": KindInt, "float": KindFloat, "bool": KindBool, "uuid": KindUUID, "string": KindString, "bytes": KindBytes,
}

func (k ScalarKind) String() string { return nameOf(scalarKindNames, k) }

// nameOf returns the spec's spelling of v, or "?N" when v has none.
func nameOf[V comparable](names map[string]V, v V) string {
	for name, x := range names {
		if x == v {
			return name
		}
	}
	return fmt.Sprintf("?%v", any(v))
}

// Scalar is a named primitive.
type Scalar struct {
	Name   string
	Kind   ScalarKind
	Size   int     // bytes, for int
	Signed bool    // for int
	Length *Scalar // length prefix, for string and bytes (nil when Rest)
	Max    int     // maximum length in bytes, for string and bytes
	UTF8   bool    // strings: validate UTF-8 on decode
	Rest   bool    // bytes: the rest of the frame
	Line   int
}

// Import is another spec whose enums and untagged records a spec uses.
type Import struct {
	Spec *Spec
	Go   string // the Go import path of its generated package
	Line int
}

// Enum is a set of named values of an integer wire type.
type Enum struct {
	From *Import // the spec that declares it, when imported; nil for the spec's own
	// CopiedFrom is the path (as imported) of the spec whose definition an own enum copies.
	CopiedFrom string
	Name       string
	Type       *Scalar
	Prefix     string
	Doc        string
	Values     []EnumValue
	Line       int
}

// EnumValue is one member of an Enum.
type EnumValue struct {
	Value uint64
	Name  string
	Doc   string
	Line  int
}

// Bitset names the bits of an integer wire type.
type Bitset struct {
	Name   string
	Type   *Scalar
	Prefix string
	Doc    string
	Bits   []Bit
	Line   int
}

// Bit is one named bit of a Bitset.
type Bit struct {
	Bit  int
	Name string
	Doc  string
	Line int
}

// ConstGroup is a block of named string constants.
type ConstGroup struct {
	Name   string
	Prefix string
	Doc    string
	Values []Const
	Line   int
}

// Const is one string constant.
type Const struct {
	Name, Value, Doc string
	Line             int
}

// Record is an ordered set of fields: a named record, or the element of a repeated group.
type Record struct {
	From   *Import // the spec that declares it, when imported; nil for the spec's own
	Name   string
	Doc    string
	Fields []*Field
	Inline bool // the element of a repeated group, declared inside a field
	Line   int
}

// List is a named, counted list of records (e.g. FIBP's key).
type List struct {
	Name  string
	Item  *Record
	Count *Scalar
	Doc   string
	Line  int
}

// FrameKind says what an opcode stands for.
type FrameKind uint8

// The frame kinds.
const (
	FrameMessage FrameKind = iota + 1 // a message one peer sends another (frames:)
	FrameRecord                       // a stored value tagged with its opcode (records: with an opcode)
)

// Frame is one opcode: a message, or a tagged record.
type Frame struct {
	Opcode    int
	Name      string // the Go name (initialisms applied: CreateAPIKey)
	SpecName  string // the name as the spec writes it (CreateApiKey), which String returns
	Kind      FrameKind
	Direction Direction // messages only
	Group     string
	MaxBody   int // 0 = the framing maximum
	Doc       string
	Fields    []*Field
	Examples  []*Example
	Line      int
}

// Example is a named, hand-computed encoding of a frame's body: golden test data and a fuzz seed.
type Example struct {
	Name  string
	Doc   string
	Hex   []string // as written: hex bytes with a # comment naming the field
	Bytes []byte
	Line  int
}

// Field is one member of a frame or record.
type Field struct {
	Name string
	Doc  string
	Type *Type
	Line int
}

// TypeKind is the shape of a field's type.
type TypeKind uint8

// The type kinds.
const (
	TScalar TypeKind = iota + 1
	TEnum
	TBitset
	TRecord
	TList     // a named List
	TRepeated // Count-prefixed elements of Elem (inline group or record)
	TOptional
	TMap
	TArray  // T[] with the framing's array count
	TOpcode // the frame's opcode, in the framing header
)

var typeKindNames = [...]string{TScalar: "scalar", TEnum: "enum", TBitset: "bitset", TRecord: "record", TList: "list",
	TRepeated: "repeated", TOptional: "optional", TMap: "map", TArray: "array", TOpcode: "opcode"}

func (k TypeKind) String() string {
	if int(k) < len(typeKindNames) && typeKindNames[k] != "" {
		return typeKindNames[k]
	}
	return fmt.Sprintf("TypeKind(%d)", k)
}

// Type is a resolved field type.
type Type struct {
	Kind   TypeKind
	Scalar *Scalar
	Enum   *Enum
	Bitset *Bitset
	Record *Record
	List   *List
	Elem   *Type   // optional, repeated, array: the element; map: the value
	Key    *Type   // map: the key
	Count  *Scalar // repeated, array, map: the count prefix
}

// OpcodeWidth is the size of an opcode on the wire.
const OpcodeWidth = 1

// Width is the wire size of an integer-backed type (an int scalar, enum, bit set or opcode), or 0
// for any other type.
func (t *Type) Width() int {
	switch t.Kind {
	case TOpcode:
		return OpcodeWidth
	case TEnum:
		return t.Enum.Type.Size
	case TBitset:
		return t.Bitset.Type.Size
	case TScalar:
		if t.Scalar.Kind == KindInt {
			return t.Scalar.Size
		}
	}
	return 0
}
