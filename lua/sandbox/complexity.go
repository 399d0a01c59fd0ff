package sandbox

import (
	"fmt"
	"reflect"

	"github.com/yuin/gopher-lua/ast"
)

// maxConcatChain is the longest chain of .. a script may hold (a .. b .. c is 3): gopher-lua
// compiles a chain in time quadratic in its length (a 64 KiB chain took 0.36 s), and C Lua
// refuses chains of about 200 anyway (its parser nests a level per operand).
const maxConcatChain = 200

// checkComplexity walks a parsed chunk and refuses what gopher-lua's compiler would take
// quadratic time over: a chain of .. longer than maxConcatChain.
func checkComplexity(chunk string, stmts []ast.Stmt) error {
	var err error
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if err != nil {
			return
		}
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				return
			}
			if c, ok := v.Interface().(*ast.StringConcatOpExpr); ok {
				if n := concatChain(c); n > maxConcatChain {
					err = fmt.Errorf("%s: line:%d: a chain of %d .. operands, more than the %d a script may have", chunk, c.Line(), n, maxConcatChain)
					return
				}
			}
			walk(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(stmts))
	return err
}

// concatChain is the number of operands of the chain c heads (.. is right-associative).
func concatChain(c *ast.StringConcatOpExpr) int {
	n := 1
	for e := ast.Expr(c); ; n++ {
		next, ok := e.(*ast.StringConcatOpExpr)
		if !ok {
			return n
		}
		e = next.Rhs
	}
}
