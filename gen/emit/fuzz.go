package emit

import (
	. "github.com/dave/jennifer/jen"
)

func (e *emitter) fuzzFile() *File {
	f := e.newFile(true)
	f.Comment("fuzzFrame checks that decoding never panics and that whatever decodes re-encodes to")
	f.Comment("bytes that decode to an equal value and pass Check.")
	f.Func().Id("fuzzFrame").Params(Id("f").Op("*").Qual("testing", "F"), Id("fresh").Func().Params().Id("Frame"), Id("seeds").Op("...").Id("Frame")).Block(
		For(List(Id("_"), Id("s")).Op(":=").Range().Id("seeds")).Block(Id("f").Dot("Add").Call(Id("s").Dot("AppendTo").Call(Nil()))),
		e.exampleSeeds(Id("fresh").Call().Dot("Opcode").Call()),
		Id("f").Dot("Add").Call(Index().Byte().Values()),
		Id("f").Dot("Fuzz").Call(Func().Params(Id("t").Op("*").Qual("testing", "T"), Id("body").Index().Byte()).Block(
			Id("x").Op(":=").Id("fresh").Call(),
			If(Id("x").Dot("Decode").Call(Id("body")).Op("!=").Nil()).Block(Return()),
			If(Err().Op(":=").Id("x").Dot("Check").Call(), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("decoded frame fails Check: %v"), Err())),
			Id("enc").Op(":=").Id("x").Dot("AppendTo").Call(Nil()),
			If(Len(Id("enc")).Op("!=").Id("x").Dot("Size").Call()).Block(Id("t").Dot("Fatalf").Call(Lit("Size() = %d, encoded %d bytes"), Id("x").Dot("Size").Call(), Len(Id("enc")))),
			Id("y").Op(":=").Id("fresh").Call(),
			If(Err().Op(":=").Id("y").Dot("Decode").Call(Id("enc")), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("re-encoded frame does not decode: %v"), Err())),
			If(Id("diff").Op(":=").Qual(cmpPkg, "Diff").Call(Id("x"), Id("y"), Qual(cmpopts, "EquateEmpty").Call(), Qual(cmpopts, "EquateNaNs").Call()), Id("diff").Op("!=").Lit("")).Block(
				Id("t").Dot("Fatalf").Call(Lit("decode → encode → decode changed the frame (-first +second):\n%s"), Id("diff")),
			),
		)),
	)
	for _, fr := range e.sortedFrames() {
		f.Func().Id("Fuzz" + fr.Name).Params(Id("f").Op("*").Qual("testing", "F")).Block(
			Id("fuzzFrame").Call(Id("f"), Func().Params().Id("Frame").Block(Return(New(Id(fr.Name)))), Id(sampleName(fr.Name)).Call(Lit(1)), Id(sampleName(fr.Name)).Call(Lit(2)), New(Id(fr.Name))),
		)
	}
	f.Comment("FuzzDecode feeds any opcode and body to the dispatcher: it must never panic.")
	f.Func().Id("FuzzDecode").Params(Id("f").Op("*").Qual("testing", "F")).Block(
		For(List(Id("_"), Id("tc")).Op(":=").Range().Id("roundTripCases").Call()).Block(
			Id("f").Dot("Add").Call(Byte().Call(Id("tc").Dot("full").Dot("Opcode").Call()), Id("tc").Dot("full").Dot("AppendTo").Call(Nil())),
		),
		e.exampleSeeds(nil),
		Id("f").Dot("Fuzz").Call(Func().Params(Id("t").Op("*").Qual("testing", "T"), Id("op").Byte(), Id("body").Index().Byte()).Block(
			List(Id("fr"), Err()).Op(":=").Id("Decode").Call(Id("Opcode").Call(Id("op")), Id("body")),
			If(Err().Op("==").Nil().Op("&&").Id("fr").Dot("Opcode").Call().Op("!=").Id("Opcode").Call(Id("op"))).Block(
				Id("t").Dot("Fatalf").Call(Lit("decoded %v as %v"), Id("Opcode").Call(Id("op")), Id("fr").Dot("Opcode").Call()),
			),
		)),
	)
	return f
}

// exampleSeeds adds the spec's examples to a fuzz corpus: those of opcode op, or every example
// with its opcode when op is nil. It is empty when the spec has no examples.
func (e *emitter) exampleSeeds(op *Statement) Code {
	if !e.hasExamples() {
		return Null()
	}
	body := Qual(hexvecPkg, "Bytes").Call(Id("f"), Id("ex").Dot("hex").Op("..."))
	if op == nil {
		return For(List(Id("_"), Id("ex")).Op(":=").Range().Id("examples")).Block(
			Id("f").Dot("Add").Call(Byte().Call(Id("ex").Dot("op")), body),
		)
	}
	return For(List(Id("_"), Id("ex")).Op(":=").Range().Id("examples")).Block(
		If(Id("ex").Dot("op").Op("==").Add(op)).Block(Id("f").Dot("Add").Call(body)),
	)
}
