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
		Id("LengthSize").Op("=").Lit(4),
		Comment("HeaderSize is the size of the frame header that starts every frame body."),
		Id("HeaderSize").Op("=").Lit(e.headerSize()),
		Comment("RejectsTrailing reports whether frame decoders refuse bytes after the last field."),
		Id("RejectsTrailing").Op("=").Lit(fr.RejectTrailing()),
	)
	e.header(f)
	e.opcodes(f)
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

func (e *emitter) headerSize() int {
	if e.s.Framing.Style == spec.StyleFIBP {
		return 6
	}
	return 1
}

// header emits the frame header type and its codec.
func (e *emitter) header(f *File) {
	if e.s.Framing.Style == spec.StyleFIBP {
		f.Comment("Header is the fixed 6-byte start of every frame body: [u8 opcode][u8 flags][u32 request_id].")
		f.Type().Id("Header").Struct(
			Id("Opcode").Id("Opcode"),
			Id("Flags").Id("FrameFlags"),
			Comment("RequestID correlates a response with its request; bit 31 set marks a server-initiated request."),
			Id("RequestID").Uint32(),
		)
		f.Comment("AppendTo appends the header to b.")
		f.Func().Params(Id("h").Id("Header")).Id("AppendTo").Params(Id("b").Index().Byte()).Index().Byte().Block(
			Id("b").Op("=").Append(Id("b"), Byte().Call(Id("h").Dot("Opcode")), Byte().Call(Id("h").Dot("Flags"))),
			Return(Qual(wirePkg, "AppendU32").Call(Id("b"), Id("h").Dot("RequestID"))),
		)
		f.Comment("ParseHeader splits a frame body into its header and the rest, which aliases body.")
		f.Func().Id("ParseHeader").Params(Id("body").Index().Byte()).Params(Id("Header"), Index().Byte(), Error()).Block(
			If(Len(Id("body")).Op("<").Id("HeaderSize")).Block(
				Return(Id("Header").Values(), Nil(), Op("&").Qual(wirePkg, "DecodeError").Values(Dict{Id("Offset"): Lit(0), Id("Err"): Qual(wirePkg, "ErrTruncated")})),
			),
			Id("h").Op(":=").Id("Header").Values(Dict{
				Id("Opcode"):    Id("Opcode").Call(Id("body").Index(Lit(0))),
				Id("Flags"):     Id("FrameFlags").Call(Id("body").Index(Lit(1))),
				Id("RequestID"): Uint32().Call(Id("body").Index(Lit(2))).Op("<<").Lit(24).Op("|").Uint32().Call(Id("body").Index(Lit(3))).Op("<<").Lit(16).Op("|").Uint32().Call(Id("body").Index(Lit(4))).Op("<<").Lit(8).Op("|").Uint32().Call(Id("body").Index(Lit(5))),
			}),
			Return(Id("h"), Id("body").Index(Id("HeaderSize").Op(":")), Nil()),
		)
		f.Comment("AppendFrame appends a whole frame — length prefix, header and the encoding of fr — to b.")
		f.Comment("The header's opcode is taken from fr. Bodies larger than the peer's maximum frame size must")
		f.Comment("be split with continuation frames instead (see AppendContinued).")
		f.Func().Id("AppendFrame").Params(Id("b").Index().Byte(), Id("flags").Id("FrameFlags"), Id("requestID").Uint32(), Id("fr").Id("Frame")).Index().Byte().Block(
			Id("b").Op("=").Qual(wirePkg, "AppendU32").Call(Id("b"), Uint32().Call(Id("HeaderSize").Op("+").Id("fr").Dot("Size").Call())),
			Id("b").Op("=").Id("Header").Values(Dict{Id("Opcode"): Id("fr").Dot("Opcode").Call(), Id("Flags"): Id("flags"), Id("RequestID"): Id("requestID")}).Dot("AppendTo").Call(Id("b")),
			Return(Id("fr").Dot("AppendTo").Call(Id("b"))),
		)
		return
	}
	f.Comment("AppendFrame appends a whole frame — length prefix, opcode and the encoding of fr — to b.")
	f.Func().Id("AppendFrame").Params(Id("b").Index().Byte(), Id("fr").Id("Frame")).Index().Byte().Block(
		Id("b").Op("=").Qual(wirePkg, "AppendU32").Call(Id("b"), Uint32().Call(Id("HeaderSize").Op("+").Id("fr").Dot("Size").Call())),
		Id("b").Op("=").Append(Id("b"), Byte().Call(Id("fr").Dot("Opcode").Call())),
		Return(Id("fr").Dot("AppendTo").Call(Id("b"))),
	)
}

func (e *emitter) opcodes(f *File) {
	frames := e.sortedFrames()
	f.Comment("Opcode identifies a frame's operation.")
	f.Type().Id("Opcode").Uint8()
	var defs []Code
	for _, fr := range frames {
		defs = append(defs, Comment(fmt.Sprintf("%s is %s (%s).", opConst(fr), fr.Name, directionDoc[fr.Direction])))
		defs = append(defs, Id(opConst(fr)).Id("Opcode").Op("=").Lit(fr.Opcode))
	}
	f.Const().Defs(defs...)

	f.Comment("Direction says which peer sends a frame.")
	f.Type().Id("Direction").Uint8()
	f.Const().Defs(
		Id("ClientToServer").Id("Direction").Op("=").Iota().Op("+").Lit(1),
		Id("ServerToClient"),
		Id("EitherDirection"),
	)

	nameCases, dirCases, maxCases := []Code{}, []Code{}, []Code{}
	dirConst := map[spec.Direction]string{spec.DirClient: "ClientToServer", spec.DirServer: "ServerToClient", spec.DirBoth: "EitherDirection"}
	for _, fr := range frames {
		nameCases = append(nameCases, Case(Id(opConst(fr))).Block(Return(Lit(fr.Name))))
		dirCases = append(dirCases, Case(Id(opConst(fr))).Block(Return(Id(dirConst[fr.Direction]))))
		if fr.MaxBody > 0 {
			maxCases = append(maxCases, Case(Id(opConst(fr))).Block(Return(Lit(fr.MaxBody))))
		}
	}
	f.Comment("String returns the spec's name of op, or Opcode(0xNN) when op is unknown.")
	f.Func().Params(Id("op").Id("Opcode")).Id("String").Params().String().Block(
		Switch(Id("op")).Block(nameCases...),
		Return(Qual("fmt", "Sprintf").Call(Lit("Opcode(%#02x)"), Uint8().Call(Id("op")))),
	)
	f.Comment("Direction returns who sends op; 0 when op is unknown.")
	f.Func().Params(Id("op").Id("Opcode")).Id("Direction").Params().Id("Direction").Block(
		Switch(Id("op")).Block(dirCases...),
		Return(Lit(0)),
	)
	f.Comment("Known reports whether op is in the opcode table.")
	f.Func().Params(Id("op").Id("Opcode")).Id("Known").Params().Bool().Block(
		Return(Id("op").Dot("Direction").Call().Op("!=").Lit(0)),
	)
	f.Comment("MaxBody returns the largest frame length accepted for op: its own limit or MaxFrameSize.")
	f.Func().Params(Id("op").Id("Opcode")).Id("MaxBody").Params().Int().Block(
		Switch(Id("op")).Block(maxCases...),
		Return(Id("MaxFrameSize")),
	)
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
