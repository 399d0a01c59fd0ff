package emit

import (
	"fmt"

	. "github.com/dave/jennifer/jen"

	"github.com/filamq/fila/gen/spec"
)

// This file turns one resolved spec.Type into Go: its type expression, and the statements that
// encode, decode, size and check a value of it. depth numbers the loop variables of nested
// collections so that they never shadow each other.

func (e *emitter) goType(t *spec.Type) *Statement {
	switch t.Kind {
	case spec.TScalar:
		return e.scalarType(t.Scalar)
	case spec.TEnum:
		return enumIdent(t.Enum, spec.GoName(t.Enum.Name))
	case spec.TBitset:
		return Id(spec.GoName(t.Bitset.Name))
	case spec.TRecord:
		if t.Record.From != nil {
			return Qual(t.Record.From.Go, spec.GoName(t.Record.Name))
		}
		return Id(spec.GoName(t.Record.Name))
	case spec.TList:
		return Id(spec.GoName(t.List.Name))
	case spec.TOptional:
		return Qual(wirePkg, "Optional").Types(e.goType(t.Elem))
	case spec.TMap:
		return Map(e.goType(t.Key)).Add(e.goType(t.Elem))
	case spec.TArray, spec.TRepeated:
		return Index().Add(e.goType(t.Elem))
	}
	panic("emit: unknown type kind " + t.Kind.String())
}

// enumIdent names an identifier declared with enum en: qualified when en is imported.
func enumIdent(en *spec.Enum, name string) *Statement {
	if en.From != nil {
		return Qual(en.From.Go, name)
	}
	return Id(name)
}

func (e *emitter) scalarType(s *spec.Scalar) *Statement {
	switch s.Kind {
	case spec.KindInt:
		if s.Signed {
			return Int64()
		}
		return Id(fmt.Sprintf("uint%d", 8*s.Size))
	case spec.KindFloat:
		return Float64()
	case spec.KindBool:
		return Bool()
	case spec.KindUUID:
		return Qual(wirePkg, "UUID")
	case spec.KindString:
		return String()
	case spec.KindBytes:
		return Index().Byte()
	}
	panic("emit: unknown scalar kind " + s.Kind.String())
}

// intWidth is the wire width of an integer-backed type.
func intWidth(t *spec.Type) int {
	switch t.Kind {
	case spec.TEnum:
		return t.Enum.Type.Size
	case spec.TBitset:
		return t.Bitset.Type.Size
	}
	return t.Scalar.Size
}

// minSize is the fewest bytes a value of t can occupy; it bounds collection counts on decode.
func minSize(t *spec.Type) int {
	switch t.Kind {
	case spec.TScalar:
		s := t.Scalar
		switch {
		case s.Kind == spec.KindString || s.Kind == spec.KindBytes:
			if s.Rest {
				return 0
			}
			return s.Length.Size
		default:
			return s.Size
		}
	case spec.TEnum, spec.TBitset:
		return intWidth(t)
	case spec.TRecord:
		n := 0
		for _, f := range t.Record.Fields {
			n += minSize(f.Type)
		}
		return n
	case spec.TList:
		return t.List.Count.Size
	case spec.TOptional:
		return 1
	case spec.TMap, spec.TArray, spec.TRepeated:
		return t.Count.Size
	}
	return 0
}

// fixedSize returns the encoded size of t when every value has the same size.
func fixedSize(t *spec.Type) (int, bool) {
	switch t.Kind {
	case spec.TScalar:
		s := t.Scalar
		if s.Kind == spec.KindString || s.Kind == spec.KindBytes {
			return 0, false
		}
		return s.Size, true
	case spec.TEnum, spec.TBitset:
		return intWidth(t), true
	case spec.TRecord:
		n := 0
		for _, f := range t.Record.Fields {
			fs, ok := fixedSize(f.Type)
			if !ok {
				return 0, false
			}
			n += fs
		}
		return n, true
	}
	return 0, false
}

func appendInt(size int, signed bool) string {
	if signed {
		return "AppendI64"
	}
	return fmt.Sprintf("AppendU%d", 8*size)
}

func readInt(size int, signed bool) string {
	if signed {
		return "I64"
	}
	return fmt.Sprintf("U%d", 8*size)
}

// encode returns statements appending v (an addressable expression of type t) to b.
func (e *emitter) encode(t *spec.Type, v *Statement, depth int) []Code {
	b := Id("b")
	switch t.Kind {
	case spec.TScalar:
		s := t.Scalar
		switch s.Kind {
		case spec.KindInt:
			return []Code{b.Clone().Op("=").Qual(wirePkg, appendInt(s.Size, s.Signed)).Call(b, v)}
		case spec.KindFloat:
			return []Code{b.Clone().Op("=").Qual(wirePkg, "AppendF64").Call(b, v)}
		case spec.KindBool:
			return []Code{b.Clone().Op("=").Qual(wirePkg, "AppendBool").Call(b, v)}
		case spec.KindUUID:
			return []Code{b.Clone().Op("=").Qual(wirePkg, "AppendUUID").Call(b, v)}
		case spec.KindString, spec.KindBytes:
			if s.Rest {
				return []Code{b.Clone().Op("=").Append(b, v.Op("..."))}
			}
			kind := "String"
			if s.Kind == spec.KindBytes {
				kind = "Bytes"
			}
			return []Code{b.Clone().Op("=").Qual(wirePkg, fmt.Sprintf("Append%s%d", kind, 8*s.Length.Size)).Call(b, v)}
		}
	case spec.TEnum, spec.TBitset:
		w := intWidth(t)
		return []Code{b.Clone().Op("=").Qual(wirePkg, appendInt(w, false)).Call(b, Id(fmt.Sprintf("uint%d", 8*w)).Call(v))}
	case spec.TRecord, spec.TList:
		return []Code{b.Clone().Op("=").Add(v).Dot("AppendTo").Call(b)}
	case spec.TOptional:
		return []Code{If(v.Clone().Dot("Present")).Block(
			append([]Code{b.Clone().Op("=").Append(b, Lit(1))}, e.encode(t.Elem, v.Clone().Dot("Value"), depth)...)...,
		).Else().Block(b.Clone().Op("=").Append(b, Lit(0)))}
	case spec.TMap:
		k, scratch := Id(fmt.Sprintf("k%d", depth)), Id(fmt.Sprintf("scratch%d", depth))
		body := append(e.encode(t.Key, k, depth+1), e.encode(t.Elem, v.Clone().Index(k), depth+1)...)
		return []Code{Block(
			Var().Add(scratch).Index(Lit(16)).String(),
			b.Clone().Op("=").Qual(wirePkg, "AppendCount").Call(b, countWidth(t.Count), Len(v)),
			For(List(Id("_"), k).Op(":=").Range().Qual(wirePkg, "SortedKeys").Call(v, Op("&").Add(scratch))).Block(body...),
		)}
	case spec.TArray, spec.TRepeated:
		i := Id(fmt.Sprintf("i%d", depth))
		return []Code{
			b.Clone().Op("=").Qual(wirePkg, "AppendCount").Call(b, countWidth(t.Count), Len(v)),
			For(i.Clone().Op(":=").Range().Add(v)).Block(e.encode(t.Elem, v.Clone().Index(i), depth+1)...),
		}
	}
	panic("emit: cannot encode " + t.Kind.String())
}

// decodeExpr returns an expression reading a scalar or enum of type t from r.
func (e *emitter) decodeExpr(t *spec.Type) *Statement {
	r := Id("r")
	switch t.Kind {
	case spec.TScalar:
		s := t.Scalar
		switch s.Kind {
		case spec.KindInt:
			return r.Dot(readInt(s.Size, s.Signed)).Call()
		case spec.KindFloat:
			return r.Dot("F64").Call()
		case spec.KindBool:
			return r.Dot("Bool").Call()
		case spec.KindUUID:
			return r.Dot("UUID").Call()
		case spec.KindString:
			return r.Dot("String").Call(Id("r").Dot(fmt.Sprintf("Len%d", 8*s.Length.Size)).Call(Lit(s.Max)), Lit(s.UTF8))
		case spec.KindBytes:
			if s.Rest {
				return r.Dot("Rest").Call(Lit(s.Max))
			}
			return r.Dot("Bytes").Call(Id("r").Dot(fmt.Sprintf("Len%d", 8*s.Length.Size)).Call(Lit(s.Max)))
		}
	case spec.TEnum, spec.TBitset:
		return e.goType(t).Call(r.Dot(readInt(intWidth(t), false)).Call())
	}
	return nil
}

// decode returns statements reading a value of type t from r into the addressable v.
func (e *emitter) decode(t *spec.Type, v *Statement, depth int) []Code {
	if x := e.decodeExpr(t); x != nil {
		return []Code{v.Clone().Op("=").Add(x)}
	}
	switch t.Kind {
	case spec.TRecord, spec.TList:
		return []Code{v.Clone().Dot("DecodeFrom").Call(Id("r"))}
	case spec.TOptional:
		return []Code{
			v.Clone().Op("=").Add(e.goType(t)).Values(),
			If(Id("r").Dot("Present").Call()).Block(
				append([]Code{v.Clone().Dot("Present").Op("=").True()}, e.decode(t.Elem, v.Clone().Dot("Value"), depth)...)...,
			),
		}
	case spec.TMap:
		n, m, k := Id(fmt.Sprintf("n%d", depth)), Id(fmt.Sprintf("m%d", depth)), Id(fmt.Sprintf("k%d", depth))
		return []Code{Block(
			n.Clone().Op(":=").Id("r").Dot("Count").Call(countWidth(t.Count), Lit(minSize(t.Key)+minSize(t.Elem))),
			v.Clone().Op("=").Nil(),
			If(n.Clone().Op(">").Lit(0)).Block(
				m.Clone().Op(":=").Make(e.goType(t), Qual(wirePkg, "MapHint").Call(n)),
				For(Range().Add(n)).Block(
					k.Clone().Op(":=").Add(e.decodeExpr(t.Key)),
					Id("held").Op(":=").Len(m),
					m.Clone().Index(k).Op("=").Add(e.decodeExpr(t.Elem)),
					If(Len(m).Op(">").Id("held")).Block(
						Id("r").Dot("Charge").Call(Qual(wirePkg, "MapEntryMemory")), // a new entry, not a repeated key
					),
				),
				v.Clone().Op("=").Add(m),
			),
		)}
	case spec.TArray, spec.TRepeated:
		n, i := Id(fmt.Sprintf("n%d", depth)), Id(fmt.Sprintf("i%d", depth))
		return []Code{Block(
			n.Clone().Op(":=").Id("r").Dot("Count").Call(countWidth(t.Count), Lit(minSize(t.Elem))),
			If(Cap(v).Op(">=").Add(n)).Block(
				v.Clone().Op("=").Add(v).Index(Op(":").Add(n)),
			).Else().Block(
				v.Clone().Op("=").Make(e.goType(t), n),
			),
			For(i.Clone().Op(":=").Range().Add(v)).Block(
				append(e.decode(t.Elem, v.Clone().Index(i), depth+1),
					If(Id("r").Dot("Err").Call().Op("!=").Nil()).Block(Break()))...,
			),
		)}
	}
	panic("emit: cannot decode " + t.Kind.String())
}

// sizeParts splits the encoded size of v into a constant and statements adding the rest to n,
// so that a struct's fixed-size fields fold into one number and a collection's per-element
// constants into one multiplication.
func (e *emitter) sizeParts(t *spec.Type, v *Statement, depth int) (int, []Code) {
	n := Id("n")
	if fs, ok := fixedSize(t); ok {
		return fs, nil
	}
	switch t.Kind {
	case spec.TScalar: // string or bytes
		if t.Scalar.Rest {
			return 0, []Code{n.Clone().Op("+=").Len(v)}
		}
		return t.Scalar.Length.Size, []Code{n.Clone().Op("+=").Len(v)}
	case spec.TRecord, spec.TList:
		return 0, []Code{n.Clone().Op("+=").Add(v).Dot("Size").Call()}
	case spec.TOptional:
		return 1, []Code{If(v.Clone().Dot("Present")).Block(e.sizeCode(t.Elem, v.Clone().Dot("Value"), depth)...)}
	case spec.TMap:
		k, val := Id(fmt.Sprintf("k%d", depth)), Id(fmt.Sprintf("v%d", depth))
		kf, kv := e.sizeParts(t.Key, k, depth+1)
		vf, vv := e.sizeParts(t.Elem, val, depth+1)
		return t.Count.Size, append(perElement(kf+vf, v), For(List(k, val).Op(":=").Range().Add(v)).Block(append(kv, vv...)...))
	case spec.TArray, spec.TRepeated:
		i := Id(fmt.Sprintf("i%d", depth))
		ef, ev := e.sizeParts(t.Elem, v.Clone().Index(i), depth+1)
		out := perElement(ef, v)
		if len(ev) > 0 {
			out = append(out, For(i.Clone().Op(":=").Range().Add(v)).Block(ev...))
		}
		return t.Count.Size, out
	}
	panic("emit: cannot size " + t.Kind.String())
}

// perElement adds size bytes for each element of the collection v.
func perElement(size int, v *Statement) []Code {
	if size == 0 {
		return nil
	}
	return []Code{Id("n").Op("+=").Lit(size).Op("*").Len(v)}
}

// sizeCode returns statements adding the whole encoded size of v to n.
func (e *emitter) sizeCode(t *spec.Type, v *Statement, depth int) []Code {
	fixed, rest := e.sizeParts(t, v, depth)
	if fixed > 0 {
		rest = append([]Code{Id("n").Op("+=").Lit(fixed)}, rest...)
	}
	return rest
}

// sizeBody returns the body of a Size method for the given parts: one constant for every
// fixed-size part, then the variable ones.
func (e *emitter) sizeBody(parts func(add func(*spec.Type, *Statement))) []Code {
	fixed, rest := 0, []Code{}
	parts(func(t *spec.Type, v *Statement) {
		f, r := e.sizeParts(t, v, 0)
		fixed += f
		rest = append(rest, r...)
	})
	if len(rest) == 0 {
		return []Code{Return(Lit(fixed))}
	}
	return append(append([]Code{Id("n").Op(":=").Lit(fixed)}, rest...), Return(Id("n")))
}

// countWidth names a count prefix's width (wire.Count16, wire.Count32).
func countWidth(c *spec.Scalar) *Statement {
	return Qual(wirePkg, fmt.Sprintf("Count%d", 8*c.Size))
}

// countMax names the largest count a prefix can carry (math.MaxUint16, math.MaxUint32).
func countMax(c *spec.Scalar) *Statement {
	return Qual("math", fmt.Sprintf("MaxUint%d", 8*c.Size))
}

// needsCheck reports whether values of t can violate a limit that the encoder must refuse.
func needsCheck(t *spec.Type) bool {
	switch t.Kind {
	case spec.TScalar:
		return t.Scalar.Kind == spec.KindString || t.Scalar.Kind == spec.KindBytes
	case spec.TRecord:
		for _, f := range t.Record.Fields {
			if needsCheck(f.Type) {
				return true
			}
		}
		return false
	case spec.TList, spec.TMap, spec.TArray, spec.TRepeated:
		return true
	case spec.TOptional:
		return needsCheck(t.Elem)
	}
	return false
}

// check returns statements that return an error when v breaks a limit of t. name is the field's
// spec name, index (may be nil) its element index.
func (e *emitter) check(t *spec.Type, v *Statement, name string, index Code, depth int) []Code {
	wrap := func(err Code) Code {
		idx := Code(Lit(-1))
		if index != nil {
			idx = index
		}
		return Return(Qual(wirePkg, "AtField").Call(Lit(name), idx, err))
	}
	errV := Id("err")
	switch t.Kind {
	case spec.TScalar:
		s := t.Scalar
		fn := "CheckBytes"
		args := []Code{v, Lit(s.Max)}
		if s.Kind == spec.KindString {
			fn = "CheckString"
			args = append(args, Lit(s.UTF8))
		}
		return []Code{If(errV.Clone().Op(":=").Qual(wirePkg, fn).Call(args...), errV.Clone().Op("!=").Nil()).Block(wrap(errV))}
	case spec.TRecord, spec.TList:
		return []Code{If(errV.Clone().Op(":=").Add(v).Dot("Check").Call(), errV.Clone().Op("!=").Nil()).Block(wrap(errV))}
	case spec.TOptional:
		return []Code{If(v.Clone().Dot("Present")).Block(e.check(t.Elem, v.Clone().Dot("Value"), name, index, depth)...)}
	case spec.TMap, spec.TArray, spec.TRepeated:
		out := []Code{If(errV.Clone().Op(":=").Qual(wirePkg, "CheckCount").Call(Len(v), countMax(t.Count)), errV.Clone().Op("!=").Nil()).Block(wrap(errV))}
		if t.Kind == spec.TMap {
			k, val := Id(fmt.Sprintf("k%d", depth)), Id(fmt.Sprintf("v%d", depth))
			body := append(e.check(t.Key, k, name, nil, depth+1), e.check(t.Elem, val, name, nil, depth+1)...)
			return append(out, For(List(k, val).Op(":=").Range().Add(v)).Block(body...))
		}
		if !needsCheck(t.Elem) {
			return out
		}
		i := Id(fmt.Sprintf("i%d", depth))
		return append(out, For(i.Clone().Op(":=").Range().Add(v)).Block(e.check(t.Elem, v.Clone().Index(i), name, i, depth+1)...))
	}
	return nil
}
