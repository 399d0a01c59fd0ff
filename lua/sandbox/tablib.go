package sandbox

import (
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// formatFlags are the flags a conversion of string.format may have (Lua 5.1's FLAGS).
const formatFlags = "-+ #0"

// strFormat is gopher-lua's string.format behind Lua 5.1's checks of the format (at most 5
// flags, a width and a precision of at most 2 digits each: Go's fmt accepts widths up to
// 1,000,000) and a charge of the longest result the format and arguments can make.
func (s *State) strFormat(format lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		f := L.CheckString(1)
		size, arg := len(f), 2
		for i := 0; i < len(f); i++ {
			if f[i] != '%' {
				continue
			}
			if i++; i < len(f) && f[i] == '%' {
				continue
			}
			spec := i
			for i < len(f) && strings.IndexByte(formatFlags, f[i]) >= 0 {
				i++
			}
			if i-spec > len(formatFlags) {
				L.RaiseError("invalid format (repeated flags)")
			}
			i = skipDigits(L, f, i)
			if i < len(f) && f[i] == '.' {
				i = skipDigits(L, f, i+1)
			}
			if i == len(f) {
				L.RaiseError("invalid option '%%' to 'format'")
			}
			size += 99 + formattedSize(L.Get(arg), f[i])
			arg++
		}
		s.alloc(L, "string.format", size, size)
		return format(L)
	}
}

// skipDigits skips the (at most 2) digits of a width or precision at f[i:].
func skipDigits(L *lua.LState, f string, i int) int {
	j := i
	for j < len(f) && isDigit(f[j]) {
		j++
	}
	if j-i > 2 {
		L.RaiseError("invalid format (width or precision too long)")
	}
	return j
}

// formattedSize bounds the length of v formatted by conversion c, its width and precision
// aside: a string's length (four times it quoted), 320 bytes for a number in %f (1e308 has 309
// digits), 64 for anything else (a number, or a value's type and address).
func formattedSize(v lua.LValue, c byte) int {
	str, ok := v.(lua.LString)
	switch {
	case c == 'f' || c == 'F':
		return max(len(str), 320)
	case !ok:
		return 64
	case c == 'q':
		return 4*len(str) + 2
	}
	return len(str)
}

// tabConcat is table.concat (t, sep, i, j) building its result in one buffer, charged before it
// is made.
func (s *State) tabConcat(L *lua.LState) int {
	t := L.CheckTable(1)
	sep := L.OptString(2, "")
	i, j := L.OptInt(3, 1), L.OptInt(4, t.Len())
	if i > j {
		L.Push(lua.LString(""))
		return 1
	}
	size := 0
	for k := i; k <= j; k++ {
		v := t.RawGetInt(k)
		if !lua.LVCanConvToString(v) {
			L.RaiseError("invalid value (%s) at index %d in table for concat", v.Type(), k)
		}
		size += len(lua.LVAsString(v))
		if k < j {
			size += len(sep)
		}
		if size > s.maxString {
			break
		}
		s.poll(L, k-i)
	}
	s.alloc(L, "table.concat", size, size)
	var b strings.Builder
	b.Grow(size)
	for k := i; k <= j; k++ {
		b.WriteString(lua.LVAsString(t.RawGetInt(k)))
		if k < j {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// poll ends the run when its budget has run out, every checkSteps-th step n of a loop.
func (s *State) poll(L *lua.LState, n int) {
	if n%checkSteps == checkSteps-1 && s.budget.over() {
		L.RaiseError("script timed out")
	}
}

// tableSlotBytes is what table.insert charges for the slot it adds (an interface value).
const tableSlotBytes = 16

// tabInsert is table.insert, charging the slot it adds.
func (s *State) tabInsert(L *lua.LState) int {
	t := L.CheckTable(1)
	switch L.GetTop() {
	case 2:
		s.alloc(L, "table.insert", 0, tableSlotBytes)
		t.Append(L.Get(2))
	case 3:
		s.alloc(L, "table.insert", 0, tableSlotBytes)
		t.Insert(L.CheckInt(2), L.CheckAny(3))
	default:
		L.RaiseError("wrong number of arguments to 'insert'")
	}
	return 0
}

// tabSort is table.sort (t, comp) over t[1..#t], asking the budget as it compares: gopher-lua's
// sorts the table's array part without looking at the clock.
func (s *State) tabSort(L *lua.LState) int {
	t := L.CheckTable(1)
	var comp *lua.LFunction
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		comp = L.CheckFunction(2)
	}
	n := t.Len()
	s.alloc(L, "table.sort", 0, n*tableSlotBytes)
	vs := make([]lua.LValue, n)
	for k := range vs {
		vs[k] = t.RawGetInt(k + 1)
	}
	steps := 0
	sort.Slice(vs, func(a, b int) bool {
		steps++
		s.poll(L, steps)
		if comp == nil {
			return L.LessThan(vs[a], vs[b])
		}
		L.Push(comp)
		L.Push(vs[a])
		L.Push(vs[b])
		L.Call(2, 1)
		less := lua.LVAsBool(L.Get(-1))
		L.Pop(1)
		return less
	})
	for k, v := range vs {
		t.RawSetInt(k+1, v)
	}
	return 0
}
