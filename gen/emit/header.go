package emit

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

// header emits what the framing header needs: a Header type with its codec and ParseHeader when
// the header holds more than the opcode, and AppendFrame, whose parameters are the header fields
// other than the opcode (taken from the frame).
func (e *emitter) header(f *File) {
	fr := e.s.Framing
	layout := headerLayout(fr)
	lengthPrefix := Id("b").Op("=").Qual(wirePkg, appendInt(fr.Length.Size, false)).Call(Id("b"),
		Id(fmt.Sprintf("uint%d", 8*fr.Length.Size)).Call(Id("HeaderSize").Op("+").Id("fr").Dot("Size").Call()))
	if fr.OpcodeOnly() {
		f.Comment("AppendFrame appends a whole frame — length prefix, opcode and the encoding of fr — to b.")
		f.Func().Id("AppendFrame").Params(Id("b").Index().Byte(), Id("fr").Id("Frame")).Index().Byte().Block(
			lengthPrefix,
			Id("b").Op("=").Append(Id("b"), Byte().Call(Id("fr").Dot("Opcode").Call())),
			Return(Id("fr").Dot("AppendTo").Call(Id("b"))),
		)
		return
	}
	var fields, enc, bytes []Code
	parse := Dict{}
	params := []Code{Id("b").Index().Byte()}
	values := Dict{}
	off := 0
	for _, h := range fr.Header {
		name := spec.GoName(h.Name)
		fields = append(fields, append(docComment("", h.Doc), Id(name).Add(e.headerType(h.Type)))...)
		if h.Type.Width() == 1 { // runs of bytes go in one append
			bytes = append(bytes, Byte().Call(Id("h").Dot(name)))
		} else {
			enc = flushBytes(enc, &bytes)
			enc = append(enc, e.encode(h.Type, Id("h").Dot(name), 0)...)
		}
		if x := bigEndian(h.Type.Width(), off); h.Type.Kind == spec.TScalar && h.Type.Width() > 1 {
			parse[Id(name)] = x
		} else {
			parse[Id(name)] = e.headerType(h.Type).Call(x)
		}
		off += h.Type.Width()
		if h.Type.Kind == spec.TOpcode {
			values[Id(name)] = Id("fr").Dot("Opcode").Call()
			continue
		}
		params = append(params, Id(spec.GoLocal(h.Name)).Add(e.headerType(h.Type)))
		values[Id(name)] = Id(spec.GoLocal(h.Name))
	}
	enc = flushBytes(enc, &bytes)
	f.Comment(fmt.Sprintf("Header is the fixed %d-byte start of every frame body: %s.", fr.HeaderSize(), layout))
	f.Type().Id("Header").Struct(fields...)
	f.Comment("AppendTo appends the header to b.")
	f.Func().Params(Id("h").Id("Header")).Id("AppendTo").Params(Id("b").Index().Byte()).Index().Byte().Block(
		append(enc, Return(Id("b")))...,
	)
	f.Comment("ParseHeader splits a frame body into its header and the rest, which aliases body.")
	f.Func().Id("ParseHeader").Params(Id("body").Index().Byte()).Params(Id("Header"), Index().Byte(), Error()).Block(
		If(Len(Id("body")).Op("<").Id("HeaderSize")).Block(
			Return(Id("Header").Values(), Nil(), Op("&").Qual(wirePkg, "DecodeError").Values(Dict{Id("Offset"): Lit(0), Id("Err"): Qual(wirePkg, "ErrTruncated")})),
		),
		Id("h").Op(":=").Id("Header").Values(parse),
		Return(Id("h"), Id("body").Index(Id("HeaderSize").Op(":")), Nil()),
	)
	f.Comment("AppendFrame appends a whole frame — length prefix, header and the encoding of fr — to b.")
	f.Comment("The header's opcode is taken from fr, its other fields from the arguments. A body larger than")
	f.Comment("the peer's maximum frame size cannot travel as one frame.")
	f.Func().Id("AppendFrame").Params(append(params, Id("fr").Id("Frame"))...).Index().Byte().Block(
		lengthPrefix,
		Id("b").Op("=").Id("Header").Values(values).Dot("AppendTo").Call(Id("b")),
		Return(Id("fr").Dot("AppendTo").Call(Id("b"))),
	)
}

// headerType is the Go type of a header field.
func (e *emitter) headerType(t *spec.Type) *Statement {
	if t.Kind == spec.TOpcode {
		return Id("Opcode")
	}
	return e.goType(t)
}

// flushBytes appends one statement appending the pending single-byte values, if any.
func flushBytes(enc []Code, pending *[]Code) []Code {
	if len(*pending) == 0 {
		return enc
	}
	enc = append(enc, Id("b").Op("=").Append(append([]Code{Id("b")}, *pending...)...))
	*pending = nil
	return enc
}

// bigEndian returns an expression reading a width-byte big-endian integer at body[off:].
func bigEndian(width, off int) *Statement {
	if width == 1 {
		return Id("body").Index(Lit(off))
	}
	x := Uint32()
	if width == 8 {
		x = Uint64()
	} else if width == 2 {
		x = Uint16()
	}
	var expr *Statement
	for i := range width {
		part := x.Clone().Call(Id("body").Index(Lit(off + i)))
		if shift := 8 * (width - 1 - i); shift > 0 {
			part = part.Op("<<").Lit(shift)
		}
		if expr == nil {
			expr = part
		} else {
			expr = expr.Op("|").Add(part)
		}
	}
	return expr
}

// headerLayout draws the header as [u8 opcode][u8 flags][u32 request_id].
func headerLayout(fr spec.Framing) string {
	var sb strings.Builder
	for _, h := range fr.Header {
		fmt.Fprintf(&sb, "[u%d %s]", 8*h.Type.Width(), h.Name)
	}
	return sb.String()
}
