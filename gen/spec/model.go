// Package spec loads a protocol description (spec/*.yaml) into a validated, resolved model.
//
// Loading is two steps: Parse turns YAML into the model, keeping the line of every element, and
// resolves every type reference; it reports every problem at once, each as "file:line: message".
// The model is plain data with no behaviour beyond small queries; the emitter in gen/emit reads it.
package spec

// Spec is one protocol.
type Spec struct {
	File     string // path the spec was read from, for error messages and generated headers
	Protocol string // Go package name
	Title    string
	Version  int
	Doc      string
	Framing  Framing

	Scalars   []*Scalar
	Enums     []*Enum
	Bitsets   []*Bitset
	Constants []*ConstGroup
	Records   []*Record // named records, then the inline records of repeated groups
	Lists     []*List
	Frames    []*Frame
}

// Framing describes how frames are delimited.
type Framing struct {
	Style      string // "fibp" or "rift"
	MinFrame   int
	MaxFrame   int
	Trailing   string // "ignore" or "reject"
	MapCount   *Scalar
	ArrayCount *Scalar
}

// RejectTrailing reports whether decoders must fail on bytes left after the last field.
func (f Framing) RejectTrailing() bool { return f.Trailing == "reject" }

// Scalar kinds.
const (
	KindInt    = "int"
	KindFloat  = "float"
	KindBool   = "bool"
	KindUUID   = "uuid"
	KindString = "string"
	KindBytes  = "bytes"
)

// Scalar is a named primitive.
type Scalar struct {
	Name   string
	Kind   string
	Size   int     // bytes, for int
	Signed bool    // for int
	Length *Scalar // length prefix, for string and bytes (nil when Rest)
	Max    int     // maximum length in bytes, for string and bytes
	UTF8   bool    // strings: validate UTF-8 on decode
	Rest   bool    // bytes: the rest of the frame
	Line   int
}

// Enum is a set of named values of an integer wire type.
type Enum struct {
	Name   string
	Type   *Scalar
	Prefix string
	Doc    string
	Values []EnumValue
	Line   int
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

// Frame is one opcode.
type Frame struct {
	Opcode    int
	Name      string
	Direction string // "client", "server" or "both"
	Group     string
	MaxBody   int // 0 = the framing maximum
	Doc       string
	Fields    []*Field
	Line      int
}

// Field is one member of a frame or record.
type Field struct {
	Name string
	Doc  string
	Type *Type
	Line int
}

// Type kinds.
const (
	TScalar   = "scalar"
	TEnum     = "enum"
	TBitset   = "bitset"
	TRecord   = "record"
	TList     = "list"     // a named List
	TRepeated = "repeated" // Count-prefixed elements of Elem (inline group or record)
	TOptional = "optional"
	TMap      = "map"
	TArray    = "array" // T[] with the framing's array count
)

// Type is a resolved field type.
type Type struct {
	Kind   string
	Scalar *Scalar
	Enum   *Enum
	Bitset *Bitset
	Record *Record
	List   *List
	Elem   *Type   // optional, repeated, array: the element; map: the value
	Key    *Type   // map: the key
	Count  *Scalar // repeated, array, map: the count prefix
}
