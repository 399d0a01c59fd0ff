package sandbox_test

import (
	"strings"
	"testing"

	"github.com/filamq/fila/lua/sandbox"
)

// atLimit are scripts of MaxSourceBytes in shapes that make gopher-lua's compiler work hardest.
var atLimit = map[string]string{
	"concat chain":     fill("return a", " .. a"),
	"sum":              fill("return 1", " + 1"),
	"table of items":   fill("return {1", ",1") + "}",
	"statements":       fill("", "x = 1\n"),
	"constants":        fillN("return {", func(i int) string { return "'" + strings.Repeat("k", 1+i%7) + itoa(i) + "'," }) + "}",
	"functions":        fill("", "function f() return 1 end\n"),
	"constants reused": fillN("return {", func(i int) string { return itoa(min(i, 3999)) + "," }) + "}",
	"nested calls":     fill("return ", "f(") + strings.Repeat(")", 0),
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// fill repeats piece after head up to MaxSourceBytes (less room for a closing brace).
func fill(head, piece string) string {
	n := (sandbox.MaxSourceBytes - len(head) - 1) / len(piece)
	return head + strings.Repeat(piece, n)
}

func fillN(head string, piece func(i int) string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; ; i++ {
		p := piece(i)
		if b.Len()+len(p) >= sandbox.MaxSourceBytes-1 {
			return b.String()
		}
		b.WriteString(p)
	}
}

// BenchmarkCompileAtLimit reports what compiling a script of the longest accepted length costs,
// for each shape (a compile error, such as nesting too deep, costs less).
func BenchmarkCompileAtLimit(b *testing.B) {
	for name, src := range atLimit {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				sandbox.Compile("bench", src)
			}
		})
	}
}
