package emit

import (
	"fmt"
	"sort"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

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

var directionDoc = map[spec.Direction]string{spec.DirClient: "client → server", spec.DirServer: "server → client", spec.DirBoth: "either direction"}

// sender says who sends a frame, or that it is a stored record.
func sender(fr *spec.Frame) string {
	if fr.Kind == spec.FrameRecord {
		return "a stored record"
	}
	return directionDoc[fr.Direction]
}

func opConst(fr *spec.Frame) string { return "Op" + fr.Name }

// sortedFrames returns the frames ordered by opcode.
func (e *emitter) sortedFrames() []*spec.Frame {
	fs := append([]*spec.Frame(nil), e.s.Frames...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Opcode < fs[j].Opcode })
	return fs
}
