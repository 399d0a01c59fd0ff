package emit

import (
	"bytes"
	"fmt"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

func (e *emitter) recordsFile() *File {
	f := e.newFile(false)
	for _, r := range e.s.Records {
		if !r.Inline || e.owner[r] == "" {
			e.record(f, r)
		}
	}
	for _, l := range e.s.Lists {
		e.list(f, l)
	}
	return f
}

// linesPerFile keeps emitted files readable: a group whose frames take more spans several files.
const linesPerFile = 900

// chunks splits a group's frames into files of at most about linesPerFile lines, measuring
// each frame with lines (renderedLines of a file holding that frame alone).
func (e *emitter) chunks(group string, lines func(fr *spec.Frame) int) [][]*spec.Frame {
	var frames []*spec.Frame
	for _, fr := range e.s.Frames {
		if fr.Group == group {
			frames = append(frames, fr)
		}
	}
	return chunkBy(frames, lines)
}

// chunkBy splits items, in order, into runs of at most about linesPerFile lines as lines
// measures them; an item longer than that gets a run of its own.
func chunkBy[T any](items []T, lines func(T) int) [][]T {
	var out [][]T
	used := 0
	for _, it := range items {
		n := lines(it)
		if len(out) == 0 || used+n > linesPerFile && len(out[len(out)-1]) > 0 {
			out = append(out, nil)
			used = 0
		}
		out[len(out)-1] = append(out[len(out)-1], it)
		used += n
	}
	return out
}

// renderedLines counts the lines of f as rendered; a file that does not render counts
// linesPerFile, so that its frame gets a file of its own.
func renderedLines(f *File) int {
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return linesPerFile
	}
	return bytes.Count(buf.Bytes(), []byte("\n"))
}

// framesFile declares frames and the inline records they own.
func (e *emitter) framesFile(frames []*spec.Frame) *File {
	f := e.newFile(false)
	for _, fr := range frames {
		e.frame(f, fr)
		for _, r := range e.ownedRecords(fr) {
			e.record(f, r)
		}
	}
	return f
}

// ownedRecords returns the inline records fr owns, in the spec's order (they are declared and
// sampled beside it).
func (e *emitter) ownedRecords(fr *spec.Frame) []*spec.Record {
	var rs []*spec.Record
	for _, r := range e.s.Records {
		if r.Inline && e.ownerFrame[r] == fr {
			rs = append(rs, r)
		}
	}
	return rs
}

// structFields declares the Go fields of a frame or record.
func (e *emitter) structFields(fields []*spec.Field) []Code {
	var out []Code
	for i, fl := range fields {
		if i > 0 && fl.Doc != "" {
			out = append(out, Line())
		}
		out = append(out, docComment("", fl.Doc)...) // a field's doc reads as written
		out = append(out, Id(spec.GoName(fl.Name)).Add(e.goType(fl.Type)))
	}
	return out
}

// methods emits Size, AppendTo, DecodeFrom and Check for a struct with the given fields.
func (e *emitter) methods(f *File, typ string, fields []*spec.Field) {
	recv := Id("x").Op("*").Id(typ)
	field := func(fl *spec.Field) *Statement { return Id("x").Dot(spec.GoName(fl.Name)) }

	size := e.sizeBody(func(add func(*spec.Type, *Statement)) {
		for _, fl := range fields {
			add(fl.Type, field(fl))
		}
	})
	f.Comment("Size returns the number of bytes AppendTo appends.")
	if len(size) == 1 { // a constant: x is not read
		f.Func().Params(Op("*").Id(typ)).Id("Size").Params().Int().Block(size...)
	} else {
		f.Func().Params(recv).Id("Size").Params().Int().Block(size...)
	}

	var enc []Code
	for _, fl := range fields {
		enc = append(enc, e.encode(fl.Type, field(fl), 0)...)
	}
	enc = append(enc, Return(Id("b")))
	f.Comment("AppendTo appends the encoding of x to b and returns the extended slice. It allocates only")
	f.Comment("when b lacks capacity. Call Check first when x may break a protocol limit.")
	f.Func().Params(recv).Id("AppendTo").Params(Id("b").Index().Byte()).Index().Byte().Block(enc...)

	var dec []Code
	for _, fl := range fields {
		dec = append(dec, e.decode(fl.Type, field(fl), 0)...)
	}
	f.Comment("DecodeFrom overwrites every field of x with values read from r. Byte fields alias r's")
	f.Comment("buffer; r's first error sticks and is left for the caller to inspect.")
	if len(dec) == 0 {
		f.Func().Params(Id("x").Op("*").Id(typ)).Id("DecodeFrom").Params(Id("_").Op("*").Qual(wirePkg, "Reader")).Block()
	} else {
		f.Func().Params(recv).Id("DecodeFrom").Params(Id("r").Op("*").Qual(wirePkg, "Reader")).Block(dec...)
	}

	var chk []Code
	for _, fl := range fields {
		if needsCheck(fl.Type) {
			chk = append(chk, e.check(fl.Type, field(fl), fl.Name, nil, 0)...)
		}
	}
	chk = append(chk, Return(Nil()))
	f.Comment("Check reports the first value of x that AppendTo cannot encode faithfully.")
	if len(chk) == 1 {
		f.Func().Params(Op("*").Id(typ)).Id("Check").Params().Error().Block(chk...)
	} else {
		f.Func().Params(recv).Id("Check").Params().Error().Block(chk...)
	}
}

func (e *emitter) record(f *File, r *spec.Record) {
	name := spec.GoName(r.Name)
	doc := r.Doc
	if r.Inline && doc == "" {
		doc = "One element of a repeated group."
	}
	comments(f, name, doc)
	e.layout(f, r.Fields, "Encoding")
	f.Type().Id(name).Struct(e.structFields(r.Fields)...)
	e.methods(f, name, r.Fields)
}

func (e *emitter) list(f *File, l *spec.List) {
	name, item := spec.GoName(l.Name), spec.GoName(l.Item.Name)
	comments(f, name, l.Doc)
	f.Comment(fmt.Sprintf("On the wire: [%s count] followed by that many %s.", l.Count.Name, item))
	f.Type().Id(name).Index().Id(item)
	t := &spec.Type{Kind: spec.TRepeated, Elem: &spec.Type{Kind: spec.TRecord, Record: l.Item}, Count: l.Count}
	x := Parens(Op("*").Id("x"))
	f.Comment("Size returns the number of bytes AppendTo appends.")
	f.Func().Params(Id("x").Op("*").Id(name)).Id("Size").Params().Int().Block(
		e.sizeBody(func(add func(*spec.Type, *Statement)) { add(t, x.Clone()) })...)
	f.Comment("AppendTo appends the encoding of x to b.")
	f.Func().Params(Id("x").Op("*").Id(name)).Id("AppendTo").Params(Id("b").Index().Byte()).Index().Byte().Block(
		append(e.encode(t, x.Clone(), 0), Return(Id("b")))...)
	f.Comment("DecodeFrom overwrites x with a value read from r.")
	f.Func().Params(Id("x").Op("*").Id(name)).Id("DecodeFrom").Params(Id("r").Op("*").Qual(wirePkg, "Reader")).Block(
		e.decode(t, x.Clone(), 0)...)
	f.Comment("Check reports the first value of x that AppendTo cannot encode faithfully.")
	f.Func().Params(Id("x").Op("*").Id(name)).Id("Check").Params().Error().Block(
		append(e.check(t, x.Clone(), l.Name, nil, 0), Return(Nil()))...)
}

func (e *emitter) frame(f *File, fr *spec.Frame) {
	name := fr.Name
	sent := "sent " + sender(fr)
	if fr.Kind == spec.FrameRecord {
		sent = sender(fr)
	}
	f.Comment(fmt.Sprintf("%s is opcode %#02x, %s.", name, fr.Opcode, sent))
	comments(f, "", fr.Doc)
	e.layout(f, fr.Fields, "Body, after the header")
	f.Type().Id(name).Struct(e.structFields(fr.Fields)...)
	f.Comment("Opcode returns " + opConst(fr) + ".")
	f.Func().Params(Op("*").Id(name)).Id("Opcode").Params().Id("Opcode").Block(Return(Id(opConst(fr))))
	e.methods(f, name, fr.Fields)

	body := []Code{
		Var().Id("r").Qual(wirePkg, "Reader"),
		Id("r").Dot("Reset").Call(Id("body")),
		Id("x").Dot("DecodeFrom").Call(Op("&").Id("r")),
	}
	rule := "Bytes after the last known field are ignored (schema evolution by appending)."
	if e.s.Framing.RejectTrailing() {
		body = append(body, Id("r").Dot("ExpectEnd").Call())
		rule = "Bytes after the last field are an error."
	}
	body = append(body,
		If(Err().Op(":=").Id("r").Dot("Err").Call(), Err().Op("!=").Nil()).Block(
			Return(Op("&").Id("FrameError").Values(Dict{Id("Opcode"): Id(opConst(fr)), Id("Err"): Err()})),
		),
		Return(Nil()),
	)
	f.Comment("Decode decodes a whole frame body (after the header) into x. " + rule)
	f.Comment("Byte fields alias body: they stay valid while body is unchanged.")
	f.Func().Params(Id("x").Op("*").Id(name)).Id("Decode").Params(Id("body").Index().Byte()).Error().Block(body...)
}
