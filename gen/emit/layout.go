package emit

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

// layout draws a frame's body in its doc comment, one field a line with its offset while the
// offsets are fixed, as pebble's batch.go draws its records:
//
//	offset  field          encoding
//	0       queue          u16 length, then UTF-8
//	+       messages       u32 count, then each EnqueueMessage
//
// title names what is drawn ("Body, after the header", "Encoding").
func (e *emitter) layout(f *File, fields []*spec.Field, title string) {
	if len(fields) == 0 {
		f.Comment("")
		f.Comment(title + ": empty.")
		return
	}
	width := len("field")
	for _, fl := range fields {
		width = max(width, len(fl.Name))
	}
	row := func(off, name, enc string) string {
		return fmt.Sprintf("\t%-7s %-*s  %s", off, width, name, enc)
	}
	f.Comment("")
	f.Comment(title + " (big-endian; + where an offset depends on earlier fields):")
	f.Comment("")
	f.Comment(row("offset", "field", "encoding"))
	off, fixed := 0, true
	for _, fl := range fields {
		at := "+"
		if fixed {
			at = fmt.Sprint(off)
		}
		f.Comment(row(at, fl.Name, encoding(fl.Type)))
		if n, ok := fixedSize(fl.Type); ok && fixed {
			off += n
		} else {
			fixed = false
		}
	}
}

// encoding describes how a value of t is laid out.
func encoding(t *spec.Type) string {
	switch t.Kind {
	case spec.TScalar:
		s := t.Scalar
		switch s.Kind {
		case spec.KindInt:
			if s.Signed {
				return fmt.Sprintf("i%d", 8*s.Size)
			}
			return fmt.Sprintf("u%d", 8*s.Size)
		case spec.KindFloat:
			return "f64 (IEEE 754)"
		case spec.KindBool:
			return "u8 (0 or 1)"
		case spec.KindUUID:
			return "16 bytes (UUID)"
		case spec.KindString:
			return fmt.Sprintf("u%d length, then UTF-8", 8*s.Length.Size)
		case spec.KindBytes:
			if s.Rest {
				return "the rest of the body"
			}
			return fmt.Sprintf("u%d length, then bytes", 8*s.Length.Size)
		}
	case spec.TEnum:
		return fmt.Sprintf("u%d %s", 8*t.Enum.Type.Size, spec.GoName(t.Enum.Name))
	case spec.TBitset:
		return fmt.Sprintf("u%d %s", 8*t.Bitset.Type.Size, spec.GoName(t.Bitset.Name))
	case spec.TRecord:
		if t.Record.From != nil {
			return t.Record.From.Spec.Protocol + "." + spec.GoName(t.Record.Name)
		}
		return spec.GoName(t.Record.Name)
	case spec.TList:
		return fmt.Sprintf("u%d count, then each %s", 8*t.List.Count.Size, spec.GoName(t.List.Item.Name))
	case spec.TOptional:
		return "u8 present, then if 1: " + encoding(t.Elem)
	case spec.TMap:
		return fmt.Sprintf("u%d count, then each key (%s) and value (%s)", 8*t.Count.Size, short(t.Key), short(t.Elem))
	case spec.TArray, spec.TRepeated:
		return fmt.Sprintf("u%d count, then each %s", 8*t.Count.Size, short(t.Elem))
	}
	return t.Kind.String()
}

// short describes an element type in a few words.
func short(t *spec.Type) string {
	enc := encoding(t)
	if t.Kind == spec.TScalar && t.Scalar.Kind == spec.KindString {
		return "string"
	}
	if t.Kind == spec.TScalar && t.Scalar.Kind == spec.KindBytes {
		return "bytes"
	}
	return strings.TrimSpace(enc)
}
