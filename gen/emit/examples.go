package emit

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"
)

const hexvecPkg = "github.com/filamq/fila/generated/internal/hexvec"

// examplesFile emits the spec's examples as a table, and TestExamples, which decodes each one,
// checks that it encodes back to the same bytes, and compares the decoded fields with the golden
// file testdata/examples.txt (go test -rewrite rewrites it). The fuzz targets seed from the
// same table. It returns nil when the spec has no examples.
func (e *emitter) examplesFile() *File {
	var rows []Code
	for _, fr := range e.sortedFrames() {
		for _, ex := range fr.Examples {
			var lines []Code
			for _, l := range ex.Hex {
				lines = append(lines, Lit(strings.TrimSpace(l)))
			}
			rows = append(rows, Values(Id(opConst(fr)), Lit(ex.Name), Index().String().Custom(multi, lines...)))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	f := e.newFile(true)
	f.ImportName(hexvecPkg, "hexvec")
	f.Comment("example is one of the spec's examples: a frame body as commented hex.")
	f.Type().Id("example").Struct(
		Id("op").Id("Opcode"),
		Id("name").String(),
		Id("hex").Index().String(),
	)
	f.Comment(fmt.Sprintf("examples are the examples of %s, by opcode.", e.source))
	f.Var().Id("examples").Op("=").Index().Id("example").Custom(multi, rows...)
	t := Id("t")
	f.Comment("TestExamples decodes every example, checks that it encodes back to the same bytes and")
	f.Comment("compares the decoded fields with testdata/examples.txt (go test -rewrite rewrites it).")
	f.Func().Id("TestExamples").Params(t.Clone().Op("*").Qual("testing", "T")).Block(
		Var().Id("sb").Qual("strings", "Builder"),
		For(List(Id("_"), Id("ex")).Op(":=").Range().Id("examples")).Block(
			Id("body").Op(":=").Qual(hexvecPkg, "Bytes").Call(t, Id("ex").Dot("hex").Op("...")),
			List(Id("fr"), Err()).Op(":=").Id("Decode").Call(Id("ex").Dot("op"), Id("body")),
			If(Err().Op("!=").Nil()).Block(
				t.Clone().Dot("Fatalf").Call(Lit("%v %s: %v"), Id("ex").Dot("op"), Id("ex").Dot("name"), Err()),
			),
			If(Id("got").Op(":=").Id("fr").Dot("AppendTo").Call(Nil()), Op("!").Qual("bytes", "Equal").Call(Id("got"), Id("body"))).Block(
				t.Clone().Dot("Errorf").Call(Lit("%v %s: encodes back to %x, not %x"), Id("ex").Dot("op"), Id("ex").Dot("name"), Id("got"), Id("body")),
			),
			Qual("fmt", "Fprintf").Call(Op("&").Id("sb"), Lit("%v %s\n%s\n"), Id("ex").Dot("op"), Id("ex").Dot("name"), Qual(hexvecPkg, "Dump").Call(Id("fr"))),
		),
		Qual(hexvecPkg, "Golden").Call(t, Lit("testdata/examples.txt"), Id("sb").Dot("String").Call()),
	)
	return f
}

// multi lays out a composite literal one element a line.
var multi = Options{Open: "{", Close: "}", Separator: ",", Multi: true}

// hasExamples reports whether any frame of the spec has an example.
func (e *emitter) hasExamples() bool {
	for _, fr := range e.s.Frames {
		if len(fr.Examples) > 0 {
			return true
		}
	}
	return false
}
