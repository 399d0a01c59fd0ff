package sandbox_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/filamq/fila/lua/sandbox"
)

// harness calls a pattern function of the string library and describes its results (or its
// error) as one string, so that the sandbox's matcher and gopher-lua's can be compared.
const harness = `return function(op, s, p, r, init)
  local function describe(...)
    local out = { tostring(select('#', ...)) }
    for i = 1, select('#', ...) do
      local v = select(i, ...)
      out[#out + 1] = type(v) .. ":" .. tostring(v)
    end
    return table.concat(out, "|")
  end
  local ok, res = pcall(function()
    if op == "find" then return describe(string.find(s, p, init))
    elseif op == "match" then -- gopher-lua's match returns nothing, not nil, when nothing matches
      return describe((function(...) if select('#', ...) == 0 then return nil end return ... end)(string.match(s, p, init)))
    elseif op == "gsub" then
      if r == "table" then r = { a = "T", b = false, ["1"] = 1 }
      elseif r == "function" then r = function(c, ...) if c == "b" then return nil end return "<" .. tostring(c) .. ">" end
      end
      return describe(string.gsub(s, p, r))
    else
      local out = {}
      for a, b in string.gmatch(s, p) do out[#out + 1] = tostring(a) .. "," .. tostring(b) end
      return table.concat(out, ";")
    end
  end)
  if not ok then return "error" end
  return res
end`

// reference runs the harness on a plain gopher-lua state (its own pattern matcher, pm).
type reference struct {
	L  *lua.LState
	fn lua.LValue
}

func newReference(t testing.TB) *reference {
	L := lua.NewState()
	if err := L.DoString(harness); err != nil {
		t.Fatal(err)
	}
	fn := L.Get(-1)
	L.Pop(1)
	return &reference{L: L, fn: fn}
}

func (r *reference) call(t testing.TB, args ...lua.LValue) string {
	if err := r.L.CallByParam(lua.P{Fn: r.fn, NRet: 1, Protect: true}, args...); err != nil {
		t.Fatal(err)
	}
	v := r.L.Get(-1)
	r.L.Pop(1)
	return v.String()
}

// sandboxed runs the harness on a sandboxed state (the interruptible matcher).
type sandboxed struct {
	s  *sandbox.State
	fn *lua.LFunction
}

func newSandboxed(t testing.TB, lim sandbox.Limits) *sandboxed {
	s := sandbox.NewState(lim, nil)
	proto, err := sandbox.Compile("harness", harness)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(time.Second, s.L.NewFunctionFromProto(proto), 1)
	if err != nil {
		t.Fatal(err)
	}
	return &sandboxed{s: s, fn: out[0].(*lua.LFunction)}
}

func (sb *sandboxed) call(t testing.TB, args ...lua.LValue) string {
	out, err := sb.s.Run(time.Second, sb.fn, 1, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out[0].String()
}

// patternItems are the single-character items a generated pattern is made of.
var patternItems = []string{"a", "b", "c", ".", "%a", "%d", "%s", "%w", "%x", "%p", "%l", "%u", "%c",
	"%A", "%D", "%S", "%W", "%P", "%L", "%U", "[ab]", "[^a]", "[a-c]", "[%d]", "[^%s]", "[%a1]", "[b-]",
	"%(", "%.", "%%", "1", " ", "(", ")"}

// randomPattern makes a pattern of a few items with suffixes, captures, back-references,
// balances and anchors. (Not frontiers: gopher-lua's %f does not see the subject's ends as the
// character '\0', as the manual says they are; TestFrontier checks them.)
func randomPattern(rng *rand.Rand) string {
	var b strings.Builder
	if rng.IntN(5) == 0 {
		b.WriteByte('^')
	}
	// first is the first capture: 1 when it is a string capture, closed 2 (gopher-lua refuses a
	// back-reference to a position capture, which C Lua never matches)
	open, first := 0, 0
	for range 1 + rng.IntN(6) {
		switch k := rng.IntN(20); {
		case k < 2 && open < 3:
			if rng.IntN(4) == 0 {
				b.WriteString("()")
				if first == 0 {
					first = -1
				}
			} else {
				b.WriteByte('(')
				open++
				if first == 0 {
					first = 1
				}
			}
		case k < 4 && open > 0:
			if strings.HasSuffix(b.String(), "(") {
				b.WriteByte('.') // "()" is a position capture
			}
			b.WriteByte(')')
			if open--; open == 0 && first == 1 {
				first = 2
			}
		case k == 4 && first == 2:
			b.WriteString("%1")
		case k == 5:
			b.WriteString("%b()")
		default:
			item := patternItems[rng.IntN(len(patternItems))]
			if item == "(" || item == ")" {
				item = "%" + item
			}
			b.WriteString(item)
			b.WriteString([]string{"", "", "*", "+", "-", "?"}[rng.IntN(6)])
		}
	}
	for ; open > 0; open-- {
		if strings.HasSuffix(b.String(), "(") {
			b.WriteByte('.')
		}
		b.WriteByte(')')
	}
	if rng.IntN(5) == 0 {
		b.WriteByte('$')
	}
	return b.String()
}

func randomSubject(rng *rand.Rand) string {
	const alphabet = "aabbcc1 2(.)%A\tz"
	b := make([]byte, rng.IntN(12))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// TestMatcherAgreesWithGopherLua checks the interruptible matcher against gopher-lua's (its
// naive twin) on generated patterns and subjects: find, match, gmatch and gsub give the same
// results, or both fail.
func TestMatcherAgreesWithGopherLua(t *testing.T) {
	ref, sb := newReference(t), newSandboxed(t, sandbox.DefaultLimits())
	defer ref.L.Close()
	defer sb.s.Close()
	rng := rand.New(rand.NewPCG(1, 26))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		subject, pattern := randomSubject(rng), randomPattern(rng)
		op := []string{"find", "match", "gsub", "gmatch"}[rng.IntN(4)]
		repl := []string{"<%0>", "%1", "x", "%%", "[%1%1]", "table", "function"}[rng.IntN(7)]
		init := lua.LValue(lua.LNil)
		if (op == "find" || op == "match") && rng.IntN(3) == 0 {
			init = lua.LNumber(rng.IntN(2*len(subject)+3) - len(subject) - 1) // from -len-1 to len+1
		}
		args := []lua.LValue{lua.LString(op), lua.LString(subject), lua.LString(pattern), lua.LString(repl), init}
		want, got := ref.call(t, args...), sb.call(t, args...)
		if want != got {
			t.Errorf("%s(%q, %q, %q, %v): gopher-lua %q, sandbox %q", op, subject, pattern, repl, init, want, got)
		}
	}
}
