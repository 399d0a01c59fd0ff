package emit

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

// protocolFile declares the package doc, framing constants, the frame header, opcodes, enums,
// bit sets and string constants.
func (e *emitter) protocolFile() *File {
	s := e.s
	f := e.newFile(false)
	doc := strings.TrimSpace(s.Doc)
	if doc == "" {
		doc = s.Title + "."
	}
	f.PackageComment(fmt.Sprintf("Package %s is the %s, version %d: %s", s.Protocol, s.Title, s.Version, doc))

	fr := s.Framing
	f.Const().Defs(
		Comment("Version is the protocol version these codecs implement."),
		Id("Version").Op("=").Lit(s.Version),
		Comment("MinFrameSize is the smallest accepted value of a frame's length prefix."),
		Id("MinFrameSize").Op("=").Lit(fr.MinFrame),
		Comment("MaxFrameSize is the default largest value of a frame's length prefix."),
		Id("MaxFrameSize").Op("=").Lit(fr.MaxFrame),
		Comment("LengthSize is the size of the length prefix in front of every frame."),
		Id("LengthSize").Op("=").Lit(fr.Length.Size),
		Comment("HeaderSize is the size of the frame header that starts every frame body."),
		Id("HeaderSize").Op("=").Lit(fr.HeaderSize()),
		Comment("RejectsTrailing reports whether frame decoders refuse bytes after the last field."),
		Id("RejectsTrailing").Op("=").Lit(fr.RejectTrailing()),
	)
	e.header(f)
	e.opcodes(f)
	return f
}

// enumsFile declares the enums, bit sets and string constants.
func (e *emitter) enumsFile() *File {
	s := e.s
	f := e.newFile(false)
	for _, en := range s.Enums {
		e.enum(f, en)
	}
	for _, bs := range s.Bitsets {
		e.bitset(f, bs)
	}
	for _, g := range s.Constants {
		comments(f, "", g.Doc)
		var defs []Code
		for _, c := range g.Values {
			defs = append(defs, docComment(g.Prefix+c.Name, c.Doc)...)
			defs = append(defs, Id(g.Prefix+c.Name).Op("=").Lit(c.Value))
		}
		f.Const().Defs(defs...)
	}
	return f
}

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

func (e *emitter) opcodes(f *File) {
	frames := e.sortedFrames()
	f.Comment("Opcode identifies a frame's operation.")
	f.Type().Id("Opcode").Uint8()
	var defs []Code
	for _, fr := range frames {
		defs = append(defs, Comment(fmt.Sprintf("%s is %s (%s).", opConst(fr), fr.Name, sender(fr))))
		defs = append(defs, Id(opConst(fr)).Id("Opcode").Op("=").Op(fmt.Sprintf("%#02x", fr.Opcode))) // hex, as in the spec
	}
	f.Const().Defs(defs...)

	messages, limits := false, false
	for _, fr := range frames {
		messages = messages || fr.Kind == spec.FrameMessage
		limits = limits || fr.MaxBody > 0
	}
	if messages {
		f.Comment("Direction says which peer sends a frame.")
		f.Type().Id("Direction").Uint8()
		f.Const().Defs(
			Id("ClientToServer").Id("Direction").Op("=").Iota().Op("+").Lit(1),
			Id("ServerToClient"),
			Id("EitherDirection"),
		)
	}
	info := []Code{Id("name").String()}
	if messages {
		info = append(info, Id("direction").Id("Direction"))
	}
	if limits {
		info = append(info, Id("maxBody").Int().Comment("0: MaxFrameSize"))
	}
	dirConst := map[spec.Direction]string{spec.DirClient: "ClientToServer", spec.DirServer: "ServerToClient", spec.DirBoth: "EitherDirection"}
	var rows []Code // in opcode order, one line each
	for _, fr := range frames {
		row := []Code{Lit(fr.SpecName)}
		if messages {
			dir := Code(Lit(0)) // a stored record
			if fr.Kind == spec.FrameMessage {
				dir = Id(dirConst[fr.Direction])
			}
			row = append(row, dir)
		}
		if limits {
			row = append(row, Lit(fr.MaxBody))
		}
		rows = append(rows, Id(opConst(fr)).Op(":").Values(row...))
	}
	f.Comment("opcodeInfo is what the spec says about one opcode.")
	f.Type().Id("opcodeInfo").Struct(info...)
	f.Comment("opcodeTable describes every opcode of the spec; the others have the zero opcodeInfo.")
	f.Var().Id("opcodeTable").Op("=").Index(Lit(256)).Id("opcodeInfo").Custom(multi, rows...)

	f.Comment("String returns the spec's name of op, or Opcode(0xNN) when op is unknown.")
	f.Func().Params(Id("op").Id("Opcode")).Id("String").Params().String().Block(
		If(Id("name").Op(":=").Id("opcodeTable").Index(Id("op")).Dot("name"), Id("name").Op("!=").Lit("")).Block(Return(Id("name"))),
		Return(Qual("fmt", "Sprintf").Call(Lit("Opcode(%#02x)"), Uint8().Call(Id("op")))),
	)
	if messages {
		f.Comment("Direction returns who sends op; 0 when op is unknown or a stored record.")
		f.Func().Params(Id("op").Id("Opcode")).Id("Direction").Params().Id("Direction").Block(
			Return(Id("opcodeTable").Index(Id("op")).Dot("direction")),
		)
	}
	f.Comment("Known reports whether op is in the opcode table.")
	f.Func().Params(Id("op").Id("Opcode")).Id("Known").Params().Bool().Block(
		Return(Id("opcodeTable").Index(Id("op")).Dot("name").Op("!=").Lit("")),
	)
	if limits { // only where some opcode has a limit of its own
		f.Comment("MaxBody returns the largest frame length accepted for op: its own limit or MaxFrameSize.")
		f.Func().Params(Id("op").Id("Opcode")).Id("MaxBody").Params().Int().Block(
			If(Id("n").Op(":=").Id("opcodeTable").Index(Id("op")).Dot("maxBody"), Id("n").Op(">").Lit(0)).Block(Return(Id("n"))),
			Return(Id("MaxFrameSize")),
		)
	}
}

func (e *emitter) enum(f *File, en *spec.Enum) {
	name := spec.GoName(en.Name)
	wt := e.scalarType(en.Type)
	comments(f, name, en.Doc)
	f.Type().Id(name).Add(wt)
	var defs, nameCases, docCases []Code
	for _, v := range en.Values {
		c := en.Prefix + spec.GoName(v.Name)
		defs = append(defs, docComment(c, v.Doc)...)
		defs = append(defs, Id(c).Id(name).Op("=").Lit(int(v.Value)))
		nameCases = append(nameCases, Case(Id(c)).Block(Return(Lit(v.Name))))
		docCases = append(docCases, Case(Id(c)).Block(Return(Lit(strings.TrimSpace(v.Doc)))))
	}
	f.Const().Defs(defs...)
	f.Comment("String returns the spec's name of v, or " + name + "(0xNN) when v is unknown.")
	f.Func().Params(Id("v").Id(name)).Id("String").Params().String().Block(
		Switch(Id("v")).Block(nameCases...),
		Return(Qual("fmt", "Sprintf").Call(Lit(name+"(%#x)"), e.scalarType(en.Type).Call(Id("v")))),
	)
	f.Comment("Description returns the spec's description of v, or \"\" when v is unknown.")
	f.Func().Params(Id("v").Id(name)).Id("Description").Params().String().Block(
		Switch(Id("v")).Block(docCases...),
		Return(Lit("")),
	)
	var all []Code
	for _, v := range en.Values {
		all = append(all, Id(en.Prefix+spec.GoName(v.Name)))
	}
	f.Comment("Known reports whether v is one of the values the spec defines.")
	f.Func().Params(Id("v").Id(name)).Id("Known").Params().Bool().Block(
		Switch(Id("v")).Block(Case(all...).Block(Return(True()))),
		Return(False()),
	)
	f.Comment("MarshalText renders v by name, for logs and JSON.")
	f.Func().Params(Id("v").Id(name)).Id("MarshalText").Params().Params(Index().Byte(), Error()).Block(
		Return(Index().Byte().Call(Id("v").Dot("String").Call()), Nil()),
	)
}

func (e *emitter) bitset(f *File, bs *spec.Bitset) {
	name := spec.GoName(bs.Name)
	comments(f, name, bs.Doc)
	f.Type().Id(name).Add(e.scalarType(bs.Type))
	var defs, parts []Code
	for _, b := range bs.Bits {
		c := bs.Prefix + spec.GoName(b.Name)
		defs = append(defs, docComment(c, b.Doc)...)
		defs = append(defs, Id(c).Id(name).Op("=").Lit(1).Op("<<").Lit(b.Bit))
		parts = append(parts, If(Id("v").Op("&").Id(c).Op("!=").Lit(0)).Block(
			Id("names").Op("=").Append(Id("names"), Lit(b.Name)),
			Id("v").Op("&^=").Id(c),
		))
	}
	f.Const().Defs(defs...)
	body := append([]Code{Var().Id("names").Index().String()}, parts...)
	body = append(body,
		If(Id("v").Op("!=").Lit(0)).Block(Id("names").Op("=").Append(Id("names"), Qual("fmt", "Sprintf").Call(Lit("%#x"), e.scalarType(bs.Type).Call(Id("v"))))),
		Return(Qual("strings", "Join").Call(Id("names"), Lit("|"))),
	)
	f.Comment("String lists the set bits by name, joined with |; unnamed bits print in hex.")
	f.Func().Params(Id("v").Id(name)).Id("String").Params().String().Block(body...)
	f.Comment("Has reports whether every bit of mask is set in v.")
	f.Func().Params(Id("v").Id(name)).Id("Has").Params(Id("mask").Id(name)).Bool().Block(
		Return(Id("v").Op("&").Id("mask").Op("==").Id("mask")),
	)
}

// dispatchFile emits the Frame interface, New and Decode.
func (e *emitter) dispatchFile() *File {
	f := e.newFile(false)
	f.Comment("Frame is implemented by every frame type of the protocol (as a pointer).")
	f.Type().Id("Frame").Interface(
		Comment("Opcode returns the frame's opcode."),
		Id("Opcode").Params().Id("Opcode"),
		Comment("Size returns the encoded body size, excluding the length prefix and header."),
		Id("Size").Params().Int(),
		Comment("AppendTo appends the encoded body to b."),
		Id("AppendTo").Params(Id("b").Index().Byte()).Index().Byte(),
		Comment("Decode replaces the frame's fields with those decoded from body."),
		Id("Decode").Params(Id("body").Index().Byte()).Error(),
		Comment("Check reports a value that the encoding cannot carry (too long, too many)."),
		Id("Check").Params().Error(),
	)
	var checks []Code
	var cases []Code
	for _, fr := range e.sortedFrames() {
		checks = append(checks, Id("_").Id("Frame").Op("=").Parens(Op("*").Id(fr.Name)).Parens(Nil()))
		cases = append(cases, Case(Id(opConst(fr))).Block(Return(New(Id(fr.Name)))))
	}
	f.Var().Defs(checks...)
	f.Comment("New returns a new zero frame for op, or nil when op is unknown.")
	f.Func().Id("New").Params(Id("op").Id("Opcode")).Id("Frame").Block(
		Switch(Id("op")).Block(cases...),
		Return(Nil()),
	)
	f.Comment("ErrUnknownOpcode is the Err of a FrameError for an opcode missing from the table.")
	f.Var().Id("ErrUnknownOpcode").Op("=").Qual("errors", "New").Call(Lit("unknown opcode"))
	f.Comment("FrameError reports a frame body that could not be decoded.")
	f.Type().Id("FrameError").Struct(
		Id("Opcode").Id("Opcode"),
		Id("Err").Error(),
	)
	f.Func().Params(Id("e").Op("*").Id("FrameError")).Id("Error").Params().String().Block(
		Return(Lit(e.s.Protocol + ": decode ").Op("+").Id("e").Dot("Opcode").Dot("String").Call().Op("+").Lit(": ").Op("+").Id("e").Dot("Err").Dot("Error").Call()),
	)
	f.Func().Params(Id("e").Op("*").Id("FrameError")).Id("Unwrap").Params().Error().Block(Return(Id("e").Dot("Err")))
	f.Comment("Decode decodes body as a frame of opcode op. Byte fields of the result alias body.")
	f.Func().Id("Decode").Params(Id("op").Id("Opcode"), Id("body").Index().Byte()).Params(Id("Frame"), Error()).Block(
		Id("fr").Op(":=").Id("New").Call(Id("op")),
		If(Id("fr").Op("==").Nil()).Block(
			Return(Nil(), Op("&").Id("FrameError").Values(Dict{Id("Opcode"): Id("op"), Id("Err"): Id("ErrUnknownOpcode")})),
		),
		If(Err().Op(":=").Id("fr").Dot("Decode").Call(Id("body")), Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		Return(Id("fr"), Nil()),
	)
	return f
}
