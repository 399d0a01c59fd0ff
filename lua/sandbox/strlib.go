package sandbox

import (
	"fmt"
	"strings"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// The library functions that loop or allocate in Go, replaced so that they answer to the run's
// budget: the pattern functions use the interruptible matcher (pattern.go), and every function
// that makes a string or grows a table charges what it makes to the run's byte budget before
// it makes it (State.alloc).

// alloc charges n bytes that fn is about to allocate for a string that will then be size bytes
// long, raising a script error when the string would exceed MaxStringBytes or the run's
// allocations MaxCallBytes.
func (s *State) alloc(L *lua.LState, fn string, size, n int) {
	if size > s.maxString {
		L.RaiseError("%s: the result would exceed %d bytes (lua.max_string_bytes)", fn, s.maxString)
	}
	if !s.budget.charge(n) {
		L.RaiseError("%s: the call's allocations would exceed its budget of %d bytes", fn, s.budget.maxBytes)
	}
}

// installLibs replaces the functions of the string and table libraries (str, tab: the library
// tables) that loop or allocate.
func (s *State) installLibs(L *lua.LState, str, tab *lua.LTable) {
	format := str.RawGetString("format").(*lua.LFunction)
	for name, fn := range map[string]lua.LGFunction{
		"find": s.strFind, "match": s.strMatch, "gmatch": s.strGmatch, "gfind": s.strGmatch, "gsub": s.strGsub,
		"rep": s.strRep, "upper": s.caseMapper("upper", strings.ToUpper), "lower": s.caseMapper("lower", strings.ToLower),
		"reverse": s.strReverse, "format": s.strFormat(format.GFunction),
	} {
		str.RawSetString(name, L.NewFunction(fn))
	}
	for name, fn := range map[string]lua.LGFunction{"concat": s.tabConcat, "insert": s.tabInsert, "sort": s.tabSort} {
		tab.RawSetString(name, L.NewFunction(fn))
	}
}

// newMatcher is a matcher of pattern pat on src that asks the run's budget.
func (s *State) newMatcher(src, pat string) *matcher {
	return &matcher{src: src, pat: pat, over: s.budget.over}
}

// protect runs f, turning a matcher's panic into the script error (or the budget's end) it is.
func protect(L *lua.LState, f func()) {
	var perr *patternError
	func() {
		defer func() {
			if r := recover(); r != nil {
				e, ok := r.(*patternError)
				if !ok {
					panic(r)
				}
				perr = e
			}
		}()
		f()
	}()
	if perr != nil {
		L.RaiseError("%s", perr.msg)
	}
}

// startIndex is Lua 5.1's init argument of find and match: 1-based, negative from the end,
// clamped to the subject.
func startIndex(L *lua.LState, n, length int) int {
	init := L.OptInt(n, 1)
	if init < 0 {
		init += length + 1
	}
	return min(max(init-1, 0), length)
}

// anchor splits a leading '^' off a pattern.
func anchor(pat string) (string, bool) {
	if strings.HasPrefix(pat, "^") {
		return pat[1:], true
	}
	return pat, false
}

func (s *State) strFind(L *lua.LState) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	init := startIndex(L, 3, len(src))
	if lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(pat, "^$*+?.([%-") {
		i := strings.Index(src[init:], pat)
		if i < 0 {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(init + i + 1))
		L.Push(lua.LNumber(init + i + len(pat)))
		return 2
	}
	p, anchored := anchor(pat)
	m := s.newMatcher(src, p)
	n := 0
	protect(L, func() {
		start, end := m.find(init, anchored)
		if start < 0 {
			L.Push(lua.LNil)
			n = 1
			return
		}
		L.Push(lua.LNumber(start + 1))
		L.Push(lua.LNumber(end))
		n = 2 + pushCaptures(L, m, start, end, false)
	})
	return n
}

// pushCaptures pushes the captures of m's last match (s, e); whole is true when a pattern
// without captures gives the whole match (match, gmatch) rather than nothing (find).
func pushCaptures(L *lua.LState, m *matcher, s, e int, whole bool) int {
	n := m.level
	if n == 0 && whole {
		n = 1
	}
	for i := range n {
		pushCapture(L, m, i, s, e)
	}
	return n
}

func pushCapture(L *lua.LState, m *matcher, i, s, e int) {
	str, pos, isPos := m.captureValue(i, s, e)
	if isPos {
		L.Push(lua.LNumber(pos))
	} else {
		L.Push(lua.LString(str))
	}
}

func (s *State) strMatch(L *lua.LState) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	init := startIndex(L, 3, len(src))
	p, anchored := anchor(pat)
	m := s.newMatcher(src, p)
	n := 0
	protect(L, func() {
		start, end := m.find(init, anchored)
		if start < 0 {
			L.Push(lua.LNil)
			n = 1
			return
		}
		n = pushCaptures(L, m, start, end, true)
	})
	return n
}

// strGmatch returns an iterator over the matches: the next match is looked for when the
// iterator is called (a leading '^' anchors the pattern, so it matches once at most).
func (s *State) strGmatch(L *lua.LState) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	p, anchored := anchor(pat)
	pos, done := 0, false
	L.Push(L.NewFunction(func(L *lua.LState) int {
		if done {
			return 0
		}
		m := s.newMatcher(src, p)
		n := 0
		protect(L, func() {
			start, end := m.find(pos, anchored)
			if start < 0 {
				done = true
				return
			}
			pos = end
			if end == start {
				pos++
			}
			done = anchored || pos > len(src)
			n = pushCaptures(L, m, start, end, true)
		})
		return n
	}))
	return 1
}

func (s *State) strGsub(L *lua.LState) int {
	src, pat := L.CheckString(1), L.CheckString(2)
	L.CheckTypes(3, lua.LTString, lua.LTNumber, lua.LTTable, lua.LTFunction)
	repl := L.Get(3)
	maxN := L.OptInt(4, len(src)+1)
	p, anchored := anchor(pat)
	m := s.newMatcher(src, p)
	var out strings.Builder
	add := func(piece string) { // charged before it is copied
		s.alloc(L, "string.gsub", out.Len()+len(piece), len(piece))
		out.WriteString(piece)
	}
	n := 0
	protect(L, func() {
		at := 0
		for n < maxN {
			m.level, m.depth = 0, 0
			e := m.match(at, 0)
			if e >= 0 {
				n++
				s.replace(L, m, repl, at, e, add)
			}
			if e > at {
				at = e
			} else if at < len(src) {
				add(src[at : at+1])
				at++
			} else {
				break
			}
			if anchored {
				break
			}
		}
		add(src[at:])
	})
	L.Push(lua.LString(out.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// replace adds what gsub puts for the match src[start:end] of m: repl with its %0-%9
// replaced, or the value the table or function repl gives for the first capture (the match
// itself when the value is false or nil).
func (s *State) replace(L *lua.LState, m *matcher, repl lua.LValue, start, end int, add func(string)) {
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		t := lua.LVAsString(r)
		for {
			i := strings.IndexByte(t, '%')
			if i < 0 || i+1 == len(t) {
				add(t)
				return
			}
			add(t[:i])
			switch d := t[i+1]; {
			case d == '0':
				add(m.src[start:end])
			case '1' <= d && d <= '9':
				str, pos, isPos := m.captureValue(int(d-'1'), start, end)
				if isPos {
					str = fmt.Sprint(pos)
				}
				add(str)
			default:
				add(t[i+1 : i+2])
			}
			t = t[i+2:]
			m.step()
		}
	}
	var key lua.LValue
	if str, pos, isPos := m.captureValue(0, start, end); isPos {
		key = lua.LNumber(pos)
	} else {
		key = lua.LString(str)
	}
	var v lua.LValue
	if t, ok := repl.(*lua.LTable); ok {
		v = L.GetTable(t, key)
	} else {
		L.Push(repl)
		n := pushCaptures(L, m, start, end, true)
		L.Call(n, 1)
		v = L.Get(-1)
		L.Pop(1)
	}
	switch v.(type) {
	case lua.LString, lua.LNumber:
		add(lua.LVAsString(v))
	default:
		if !lua.LVIsFalse(v) {
			L.RaiseError("invalid replacement value (a %s)", v.Type())
		}
		add(m.src[start:end])
	}
}

func (s *State) strRep(L *lua.LState) int {
	str, n := L.CheckString(1), L.CheckInt(2)
	if n <= 0 || str == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if n > s.maxString/len(str) {
		L.RaiseError("string.rep: the result would exceed %d bytes (lua.max_string_bytes)", s.maxString)
	}
	s.alloc(L, "string.rep", n*len(str), n*len(str))
	L.Push(lua.LString(strings.Repeat(str, n)))
	return 1
}

// caseMapper is string.upper or string.lower (gopher-lua's: Unicode case mapping, which may
// make a string up to three times longer, invalid UTF-8 bytes becoming U+FFFD).
func (s *State) caseMapper(name string, mapCase func(string) string) lua.LGFunction {
	return func(L *lua.LState) int {
		str := L.CheckString(1)
		n := len(str)
		if !isASCII(str) {
			n *= utf8.UTFMax - 1
		}
		s.alloc(L, "string."+name, len(str), n)
		L.Push(lua.LString(mapCase(str)))
		return 1
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (s *State) strReverse(L *lua.LState) int {
	str := L.CheckString(1)
	s.alloc(L, "string.reverse", len(str), len(str))
	out := make([]byte, len(str))
	for i := range out {
		out[i] = str[len(str)-1-i]
	}
	L.Push(lua.LString(out))
	return 1
}
