package emit

import (
	"fmt"
	"path"
	"strings"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

// enumDecls lists the declarations of the enums, bit sets and string constants, in that order,
// each adding itself to a file.
func (e *emitter) enumDecls() []func(f *File) {
	var out []func(f *File)
	for _, en := range e.s.Enums {
		out = append(out, func(f *File) { e.enum(f, en) })
	}
	for _, bs := range e.s.Bitsets {
		out = append(out, func(f *File) { e.bitset(f, bs) })
	}
	for _, g := range e.s.Constants {
		out = append(out, func(f *File) { constGroup(f, g) })
	}
	return out
}

// enumsFile declares decls (of enumDecls).
func (e *emitter) enumsFile(decls []func(f *File)) *File {
	f := e.newFile(false)
	for _, d := range decls {
		d(f)
	}
	return f
}

func constGroup(f *File, g *spec.ConstGroup) {
	comments(f, "", g.Doc)
	var defs []Code
	for _, c := range g.Values {
		defs = append(defs, docComment(g.Prefix+c.Name, c.Doc)...)
		defs = append(defs, Id(g.Prefix+c.Name).Op("=").Lit(c.Value))
	}
	f.Const().Defs(defs...)
}

func (e *emitter) enum(f *File, en *spec.Enum) {
	name := spec.GoName(en.Name)
	wt := e.scalarType(en.Type)
	comments(f, name, en.Doc)
	if en.CopiedFrom != "" {
		f.Comment("")
		f.Comment(fmt.Sprintf("It is declared in %s; this is a copy generated from that one definition.", path.Base(en.CopiedFrom)))
	}
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
