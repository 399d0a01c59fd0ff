package emit

import (
	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

// The emitted tests build a fully populated sample of every frame from a seed, then check that it
// survives encode → decode unchanged, that Size is exact, that every truncation fails, and that
// trailing bytes are ignored or refused as the spec says. The fuzz targets start from the same
// samples.

func sampleName(name string) string { return "sample" + spec.GoName(name) }

// sample returns an expression building a value of t from the int variable seed.
func (e *emitter) sample(t *spec.Type, name string) *Statement {
	seed := Id("seed")
	switch t.Kind {
	case spec.TScalar:
		s := t.Scalar
		switch s.Kind {
		case spec.KindInt:
			return e.scalarType(s).Call(seed.Clone().Op("*").Lit(37).Op("+").Lit(len(name)))
		case spec.KindFloat:
			return Float64().Call(seed).Op("+").Lit(0.5)
		case spec.KindBool:
			return seed.Clone().Op("%").Lit(2).Op("==").Lit(1)
		case spec.KindUUID:
			return Qual(wirePkg, "UUID").Values(Byte().Call(seed), Lit(1), Lit(2), Lit(3), Lit(4), Lit(5), Lit(6), Lit(7), Lit(8), Lit(9), Lit(10), Lit(11), Lit(12), Lit(13), Lit(14), Lit(15))
		case spec.KindString:
			return Qual("fmt", "Sprintf").Call(Lit(name+"-%d-é"), seed)
		case spec.KindBytes:
			return Index().Byte().Call(Qual("fmt", "Sprintf").Call(Lit(name+"-%d\x00\xff"), seed))
		}
	case spec.TEnum:
		var vals []Code
		for _, v := range t.Enum.Values {
			vals = append(vals, enumIdent(t.Enum, t.Enum.Prefix+spec.GoName(v.Name)))
		}
		return Index().Add(e.goType(t)).Values(vals...).Index(seed.Clone().Op("%").Lit(len(vals)))
	case spec.TBitset:
		return e.goType(t).Call(seed)
	case spec.TRecord:
		if t.Record.From != nil {
			// Its sample builder lives in its own package's tests, which round-trip it; here it
			// travels as its zero value.
			return e.goType(t).Values()
		}
		return Id(sampleName(t.Record.Name)).Call(seed)
	case spec.TList:
		item := Id(sampleName(t.List.Item.Name))
		return e.goType(t).Values(item.Clone().Call(seed), item.Clone().Call(seed.Clone().Op("+").Lit(1)))
	case spec.TOptional:
		return Qual(wirePkg, "Some").Call(e.sample(t.Elem, name))
	case spec.TMap:
		return e.goType(t).Values(Dict{
			Qual("fmt", "Sprint").Call(Lit("k1-"), seed): Qual("fmt", "Sprint").Call(Lit("v1-"), seed),
			Lit("k2"): Lit("v2"),
		})
	case spec.TArray, spec.TRepeated:
		one := e.sample(t.Elem, name)
		return Func().Params().Add(e.goType(t)).Block(
			Var().Id("out").Add(e.goType(t)),
			For(List(Id("_"), Id("seed")).Op(":=").Range().Index(Lit(2)).Int().Values(seed, seed.Clone().Op("+").Lit(1))).Block(
				Id("out").Op("=").Append(Id("out"), one),
			),
			Return(Id("out")),
		).Call()
	}
	panic("emit: cannot sample " + t.Kind.String())
}

func (e *emitter) sampleFunc(f *File, typ string, fields []*spec.Field, ptr bool) {
	d := Dict{}
	for _, fl := range fields {
		d[Id(spec.GoName(fl.Name))] = e.sample(fl.Type, fl.Name)
	}
	ret := Id(typ)
	val := Id(typ).Values(d)
	if ptr {
		ret = Op("*").Id(typ)
		val = Op("&").Id(typ).Values(d)
	}
	seedParam := Id("seed").Int()
	if len(fields) == 0 {
		seedParam = Id("_").Int()
	}
	f.Func().Id("sample" + typ).Params(seedParam).Add(ret).Block(Return(val))
}

// restTail returns an expression for the length of a frame's rest-of-frame field, or nil.
func restTail(fr *spec.Frame, v *Statement) *Statement {
	if n := len(fr.Fields); n > 0 {
		last := fr.Fields[n-1]
		if last.Type.Kind == spec.TScalar && last.Type.Scalar.Rest {
			return Len(v.Dot(spec.GoName(last.Name)))
		}
	}
	return nil
}

// roundTripFile declares the samples of the records no frame owns, the case table (joining the
// tables of the group files, caseFuncs) and the round-trip test.
func (e *emitter) roundTripFile(caseFuncs []string) *File {
	f := e.newFile(true)
	for _, r := range e.s.Records {
		if !r.Inline || e.ownerFrame[r] == nil {
			e.sampleFunc(f, spec.GoName(r.Name), r.Fields, false)
		}
	}
	var tables []Code
	for _, fn := range caseFuncs {
		tables = append(tables, Id(fn).Call())
	}
	f.Func().Id("roundTripCases").Params().Index().Id("roundTripCase").Block(
		Return(Qual("slices", "Concat").Call(tables...)),
	)
	f.Var().Id("equal").Op("=").Qual(cmpopts, "EquateEmpty").Call()
	f.Type().Id("roundTripCase").Struct(
		Id("full").Id("Frame"),
		Id("tail").Int().Comment("bytes at the end of full's encoding that a truncation may remove unnoticed"),
		Id("fresh").Func().Params().Id("Frame"),
	)
	f.Comment("TestRoundTrip encodes a zero and a fully populated sample of every frame and decodes it back.")
	f.Func().Id("TestRoundTrip").Params(Id("t").Op("*").Qual("testing", "T")).Block(
		For(List(Id("_"), Id("tc")).Op(":=").Range().Id("roundTripCases").Call()).Block(
			Id("t").Dot("Run").Call(Id("tc").Dot("full").Dot("Opcode").Call().Dot("String").Call(), Func().Params(Id("t").Op("*").Qual("testing", "T")).Block(
				For(List(Id("_"), Id("in")).Op(":=").Range().Index().Id("Frame").Values(Id("tc").Dot("fresh").Call(), Id("tc").Dot("full"))).Block(
					Id("checkRoundTrip").Call(Id("t"), Id("in"), Id("tc").Dot("fresh")),
				),
				Id("checkTruncations").Call(Id("t"), Id("tc")),
			)),
		),
	)
	f.Func().Id("checkRoundTrip").Params(Id("t").Op("*").Qual("testing", "T"), Id("in").Id("Frame"), Id("fresh").Func().Params().Id("Frame")).Block(
		Id("t").Dot("Helper").Call(),
		If(Err().Op(":=").Id("in").Dot("Check").Call(), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("Check: %v"), Err())),
		Id("b").Op(":=").Id("in").Dot("AppendTo").Call(Nil()),
		If(Len(Id("b")).Op("!=").Id("in").Dot("Size").Call()).Block(Id("t").Dot("Fatalf").Call(Lit("Size() = %d, encoded %d bytes"), Id("in").Dot("Size").Call(), Len(Id("b")))),
		List(Id("got"), Err()).Op(":=").Id("Decode").Call(Id("in").Dot("Opcode").Call(), Id("b")),
		If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("Decode: %v"), Err())),
		If(Id("diff").Op(":=").Qual(cmpPkg, "Diff").Call(Id("in"), Id("got"), Id("equal")), Id("diff").Op("!=").Lit("")).Block(
			Id("t").Dot("Fatalf").Call(Lit("round trip changed the frame (-in +out):\n%s"), Id("diff")),
		),
		Comment("Decoding into a frame that holds other values must overwrite all of them."),
		Id("reused").Op(":=").Id("fresh").Call(),
		If(Err().Op(":=").Id("reused").Dot("Decode").Call(Id("in").Dot("AppendTo").Call(Nil())), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
		If(Err().Op(":=").Id("reused").Dot("Decode").Call(Id("b")), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
		If(Id("diff").Op(":=").Qual(cmpPkg, "Diff").Call(Id("in"), Id("reused"), Id("equal")), Id("diff").Op("!=").Lit("")).Block(
			Id("t").Dot("Fatalf").Call(Lit("decoding into a used frame left stale values (-in +out):\n%s"), Id("diff")),
		),
		Id("tailed").Op(":=").Append(Id("b").Index(Op(":").Len(Id("b")).Op(":").Len(Id("b"))), Lit(0xAB)),
		Id("out").Op(":=").Id("fresh").Call(),
		Err().Op("=").Id("out").Dot("Decode").Call(Id("tailed")),
		List(Id("_"), Id("hasRest")).Op(":=").Id("restTail").Call(Id("in")),
		Switch().Block(
			Case(Id("RejectsTrailing").Op("&&").Err().Op("==").Nil().Op("&&").Op("!").Id("hasRest")).Block(
				Id("t").Dot("Fatalf").Call(Lit("a trailing byte was accepted")),
			),
			Case(Op("!").Id("RejectsTrailing").Op("&&").Err().Op("!=").Nil()).Block(
				Id("t").Dot("Fatalf").Call(Lit("a trailing byte was refused: %v"), Err()),
			),
		),
	)
	e.restTailFunc(f)
	f.Func().Id("checkTruncations").Params(Id("t").Op("*").Qual("testing", "T"), Id("tc").Id("roundTripCase")).Block(
		Id("t").Dot("Helper").Call(),
		Id("b").Op(":=").Id("tc").Dot("full").Dot("AppendTo").Call(Nil()),
		For(Id("n").Op(":=").Lit(0), Id("n").Op("<").Len(Id("b")).Op("-").Id("tc").Dot("tail"), Id("n").Op("++")).Block(
			If(Err().Op(":=").Id("tc").Dot("fresh").Call().Dot("Decode").Call(Id("b").Index(Op(":").Id("n"))), Err().Op("==").Nil()).Block(
				Id("t").Dot("Fatalf").Call(Lit("decoding the first %d of %d bytes succeeded"), Id("n"), Len(Id("b"))),
			),
		),
	)
	return f
}

// roundTripGroupFile declares the samples of frames (of one group), with the inline records
// they own, and casesFunc, which returns their round-trip cases.
func (e *emitter) roundTripGroupFile(casesFunc string, frames []*spec.Frame) *File {
	f := e.newFile(true)
	var cases []Code
	for _, fr := range frames {
		e.sampleFunc(f, fr.Name, fr.Fields, true)
		for _, r := range e.ownedRecords(fr) {
			e.sampleFunc(f, spec.GoName(r.Name), r.Fields, false)
		}
		tail := Code(Lit(0))
		if rt := restTail(fr, Id(sampleName(fr.Name)).Call(Lit(1))); rt != nil {
			tail = rt
		}
		cases = append(cases, Values(Dict{
			Id("full"):  Id(sampleName(fr.Name)).Call(Lit(1)),
			Id("tail"):  tail,
			Id("fresh"): Func().Params().Id("Frame").Block(Return(New(Id(fr.Name)))),
		}))
	}
	f.Func().Id(casesFunc).Params().Index().Id("roundTripCase").Block(
		Return(Index().Id("roundTripCase").Values(cases...)),
	)
	return f
}

// restTailFunc emits restTail(Frame) int: the length of a frame's rest-of-frame field, which can
// swallow a trailing byte without error.
func (e *emitter) restTailFunc(f *File) {
	var cases []Code
	for _, fr := range e.sortedFrames() {
		if rt := restTail(fr, Id("x")); rt != nil {
			cases = append(cases, Case(Op("*").Id(fr.Name)).Block(Return(rt, True())))
		}
	}
	body := []Code{}
	if len(cases) > 0 {
		body = append(body, Switch(Id("x").Op(":=").Id("fr").Assert(Type())).Block(cases...))
	}
	body = append(body, Return(Lit(0), False()))
	param := Id("fr").Id("Frame")
	if len(cases) == 0 {
		param = Id("_").Id("Frame")
	}
	f.Comment("restTail returns the length of a frame's rest-of-frame field and whether it has one.")
	f.Func().Id("restTail").Params(param).Params(Int(), Bool()).Block(body...)
}
