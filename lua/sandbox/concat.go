package sandbox

import (
	"fmt"
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// The .. operator is the one way a script makes a string that no library function sees: the VM
// concatenates in one instruction, so s = s .. s doubled a string past any bound (64 MiB live
// and more in a 10 ms run), and one instruction copying it overran the time budget. Compile
// therefore rewrites every chain of .. into a call of concatFunction, a global a script cannot
// name (its name is no identifier), which charges the result like any library string.

// concatFunction is the global name the rewritten chains call.
const concatFunction = "fila concat"

// maxConcatChain is the longest chain of .. a script may hold (a .. b .. c is 3): C Lua refuses
// chains of about 200 (its parser nests a level per operand), and so does gopher-lua's register
// allocation.
const maxConcatChain = 200

// rewriteConcat replaces each chain of .. in a parsed chunk by a call of concatFunction with the
// chain's operands, refusing a chain longer than maxConcatChain.
func rewriteConcat(chunk string, stmts []ast.Stmt) error {
	var err error
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if err != nil {
			return
		}
		switch v.Kind() {
		case reflect.Interface:
			if v.IsNil() {
				return
			}
			if c, ok := v.Interface().(*ast.StringConcatOpExpr); ok {
				call, cerr := concatCall(chunk, c)
				if cerr != nil {
					err = cerr
					return
				}
				walk(reflect.ValueOf(&call.Args).Elem())
				v.Set(reflect.ValueOf(call))
				return
			}
			walk(v.Elem())
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
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
	walk(reflect.ValueOf(&stmts).Elem())
	return err
}

// concatCall is the call that replaces the chain c heads (.. is right-associative: its operands
// are c.Lhs, then those of c.Rhs).
func concatCall(chunk string, c *ast.StringConcatOpExpr) (*ast.FuncCallExpr, error) {
	var args []ast.Expr
	e := ast.Expr(c)
	for {
		next, ok := e.(*ast.StringConcatOpExpr)
		if !ok {
			break
		}
		args = append(args, next.Lhs)
		e = next.Rhs
	}
	args = append(args, e)
	if len(args) > maxConcatChain {
		return nil, fmt.Errorf("%s: line:%d: a chain of %d .. operands, more than the %d a script may have", chunk, c.Line(), len(args), maxConcatChain)
	}
	fn := &ast.IdentExpr{Value: concatFunction}
	call := &ast.FuncCallExpr{Func: fn, Args: args, AdjustRet: true} // one value, never a tail call
	for _, n := range []interface {
		SetLine(int)
		SetLastLine(int)
	}{fn, call} {
		n.SetLine(c.Line())
		n.SetLastLine(c.LastLine())
	}
	return call, nil
}

// concat is the .. of a chain of operands, as the VM does it (right to left; runs of strings
// and numbers joined at once, __concat metamethods otherwise), each string it makes charged
// first.
func (s *State) concat(L *lua.LState) int {
	n := L.GetTop()
	rhs := L.Get(n)
	for i := n - 1; i >= 1; {
		lhs := L.Get(i)
		if !lua.LVCanConvToString(lhs) || !lua.LVCanConvToString(rhs) {
			op := L.GetMetaField(lhs, "__concat")
			if op == lua.LNil {
				op = L.GetMetaField(rhs, "__concat")
			}
			if op.Type() != lua.LTFunction {
				L.RaiseError("cannot perform concat operation between %v and %v", lhs.Type(), rhs.Type())
			}
			L.Push(op)
			L.Push(lhs)
			L.Push(rhs)
			L.Call(2, 1)
			rhs = L.Get(-1)
			L.Pop(1)
			i--
			continue
		}
		j, size := i, len(lua.LVAsString(rhs))
		for ; j >= 1 && lua.LVCanConvToString(L.Get(j)); j-- {
			size += len(lua.LVAsString(L.Get(j)))
		}
		s.alloc(L, "..", size, size)
		var b strings.Builder
		b.Grow(size)
		for k := j + 1; k <= i; k++ {
			b.WriteString(lua.LVAsString(L.Get(k)))
		}
		b.WriteString(lua.LVAsString(rhs))
		rhs, i = lua.LString(b.String()), j
	}
	L.Push(rhs)
	return 1
}
