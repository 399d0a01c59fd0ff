package sandbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/filamq/fila/lua/sandbox"
)

// hangGuard bounds how long a test waits for a run that must end with its budget: far beyond
// any budget, it only turns a hang into a failure.
const hangGuard = 20 * time.Second

// runGuarded compiles src and runs it once on a new state with lim, failing the test if the
// run has not ended within hangGuard. It returns the run's first result and error.
func runGuarded(t *testing.T, lim sandbox.Limits, src string) (lua.LValue, error) {
	t.Helper()
	proto, err := sandbox.Compile("test", src)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		v   lua.LValue
		err error
	}
	done := make(chan result, 1)
	go func() {
		s := sandbox.NewState(lim, nil)
		defer s.Close()
		out, err := s.Run(lim.Timeout, s.L.NewFunctionFromProto(proto), 1)
		var v lua.LValue = lua.LNil
		if err == nil {
			v = out[0]
		}
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(hangGuard):
		t.Fatalf("the run did not end within %v (its budget is %v)", hangGuard, lim.Timeout)
		return nil, nil
	}
}

// TestEscapes runs each way a script used to escape its budgets: work or allocation inside one
// library call, which the budget checked between instructions never saw.
func TestEscapes(t *testing.T) {
	big := `local s = ("x"):rep(2^20) `
	for _, tc := range []struct {
		name, src string
		want      error  // ErrTimeout or ErrScript
		msg       string // in the error's message
		// long is true for a bomb given a budget of a second, so that the memory budget is
		// what ends it
		long bool
	}{
		{"find backtracks", `return string.find(("a"):rep(300), "a*a*a*a*a*b")`, sandbox.ErrTimeout, "", false},
		{"match backtracks", `return string.match(("a"):rep(300), "a*a*a*a*a*b")`, sandbox.ErrTimeout, "", false},
		{"gmatch backtracks", `for m in string.gmatch(("a"):rep(300), "a-a-a-a-a-b") do end`, sandbox.ErrTimeout, "", false},
		{"gsub backtracks", `return (("a"):rep(300)):gsub("a*a*a*a*a*b", "")`, sandbox.ErrTimeout, "", false},
		{"a method call backtracks", `local s = ("a"):rep(300) return s:find("a*a*a*a*a*b")`, sandbox.ErrTimeout, "", false},
		{"pcall does not catch the budget", `while true do pcall(string.find, ("a"):rep(300), "a*a*a*a*a*b") end`, sandbox.ErrTimeout, "", false},
		{"balance over a long subject", `local s = ("("):rep(2^20) for i = 1, 1000 do s:find("%b()") end`, sandbox.ErrTimeout, "", false},
		{"table.concat", big + `local t = {} for i = 1, 2000 do t[i] = s end return #table.concat(t)`, sandbox.ErrScript, "table.concat", false},
		{"string.format %s", big + `local t = {} for i = 1, 1000 do t[i] = s end return #string.format(("%s"):rep(1000), unpack(t))`, sandbox.ErrScript, "string.format", false},
		{"string.format width", `return #string.format(("%999999d"):rep(1000), unpack({}, 1, 1000))`, sandbox.ErrScript, "invalid format", false},
		{"string.gsub replacement", big + `return #s:gsub(".", s)`, sandbox.ErrScript, "string.gsub", false},
		{"string.gsub %0", `local s = ("x"):rep(2^16) return #s:gsub(".+", ("%0"):rep(2^12))`, sandbox.ErrScript, "string.gsub", false},
		{"string.rep", `return #("x"):rep(2^31)`, sandbox.ErrScript, "string.rep", false},
		{"string.upper of invalid UTF-8", `local s = ("\255"):rep(2^19) for i = 1, 100 do s:upper() end`, sandbox.ErrScript, "string.upper", true},
		{"string.lower, many times", big + `for i = 1, 100 do s:lower() end`, sandbox.ErrScript, "budget of", true},
		{"string.reverse, many times", big + `for i = 1, 100 do s:reverse() end`, sandbox.ErrScript, "budget of", true},
		{"string.rep, many times", `for i = 1, 100 do local s = ("x"):rep(2^20) end`, sandbox.ErrScript, "budget of", true},
		{"a doubling ..", `local s = "x" while true do s = s .. s end`, sandbox.ErrScript, "..: the result would exceed", false},
		{"a .. of a large string, many times", `local s = ("x"):rep(2^20 - 1) for i = 1, 100 do local t = s .. "y" end`, sandbox.ErrScript, "budget of", true},
		{"table.insert", `local t = {} for i = 1, 1e7 do table.insert(t, i) end`, sandbox.ErrScript, "table.insert", true},
		{"pattern too complex", `return string.find(("a"):rep(300), ("a?"):rep(300) .. "b")`, sandbox.ErrScript, "pattern too complex", false},
		{"malformed pattern", `return string.find("a", "[a")`, sandbox.ErrScript, "missing ']'", false},
		{"too many captures", `return string.find("a", ("()"):rep(33))`, sandbox.ErrScript, "too many captures", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := sandbox.DefaultLimits()
			if tc.long {
				lim.Timeout = time.Second
			}
			_, err := runGuarded(t, lim, tc.src)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

// TestLibrariesStillWork checks results of the replaced functions within their budgets.
func TestLibrariesStillWork(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`return table.concat({1, "b", 3.5}, ",")`, "1,b,3.5"},
		{`return table.concat({"a", "b", "c"}, "-", 2, 3)`, "b-c"},
		{`return table.concat({}, "-")`, ""},
		{`local t = {3, 1, 2} table.sort(t) return table.concat(t, ",")`, "1,2,3"},
		{`local t = {3, 1, 2} table.sort(t, function(a, b) return a > b end) return table.concat(t, ",")`, "3,2,1"},
		{`local t = {"a"} table.insert(t, "c") table.insert(t, 2, "b") return table.concat(t)`, "abc"},
		{`return string.format("%5.2f|%-3d|%s|%q", 3.14159, 7, "x", "a\n")`, " 3.14|7  |x|\"a\\n\""},
		{`return string.format("100%%")`, "100%"},
		{`return (string.gsub("hello world", "o", "0"))`, "hell0 w0rld"},
		{`return (string.gsub("hello world", "(%w+)", "<%1>"))`, "<hello> <world>"},
		{`return (string.gsub("abc", "%w", {a = "1", b = false}))`, "1bc"},
		{`return (string.gsub("abc", "%w", function(c) if c == "b" then return nil end return c:upper() end))`, "AbC"},
		{`return (string.gsub("abc", "", "-"))`, "-a-b-c-"},
		{`return (string.gsub("abc", "^a", "x"))`, "xbc"},
		{`return select(2, string.gsub("aaa", "a", "b", 2))`, "2"},
		{`return ("xAbC"):upper() .. ("xAbC"):lower() .. ("abc"):reverse()`, "XABCxabccba"},
		{`local out = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do out[#out+1] = k .. v end return table.concat(out, ";")`, "a1;b2"},
		{`return string.find("THE (quick) fox", "%((%a+)%)")`, "5"},
		{`return string.find("a.b", ".", 1, true)`, "2"},
		{`return string.match("  key = value ", "^%s*(%S+)%s*=%s*(%S+)")`, "key"},
		{`return string.match("f(a(b)c)d", "%b()")`, "(a(b)c)"},
		{`return string.match("hello hello", "(h%a+) %1")`, "hello"},
		{`return string.match("abc", "()b()")`, "2"},
		{`local n = 3 return "a" .. n .. 1.5 .. ("b"):upper()`, "a31.5B"},
		{`local mt = { __concat = function(a, b) return "T" end } local t = setmetatable({}, mt) return "x" .. t .. "y"`, "xT"},
		{`local mt = { __concat = function(a, b) return type(a) .. "+" .. type(b) end } local t = setmetatable({}, mt) return t .. "y" .. "z"`, "table+string"},
		{`local ok, err = pcall(function() return "x" .. nil end) return tostring(ok) .. " " .. err`, "false test:1: cannot perform concat operation between string and nil"},
		{`local s = "" for i = 1, 3 do s = s .. i .. "," end return s`, "1,2,3,"},
		{`local t = {} t[#t + 1] = "a" .. "b" return (function(...) return select('#', ...) end)("a" .. "b") .. t[1]`, "1ab"},
	} {
		v, err := runGuarded(t, sandbox.DefaultLimits(), tc.src)
		if err != nil || v.String() != tc.want {
			t.Errorf("%s: got %v, %v, want %q", tc.src, v, err, tc.want)
		}
	}
}

// TestFrontier checks %f, whose reading of the subject's ends gopher-lua's matcher does not share
// (the manual: the beginning and the end of the subject are handled as if they were '\0').
func TestFrontier(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`return (string.gsub("THE (quick) fox", "%f[%a]%a+", "W"))`, "W (W) W"},
		{`return (string.gsub("THE (quick) fox", "%f[%A]", "|"))`, "THE| (quick|) fox|"},
		{`return string.find(" aa)A(%b aa", "%f[^b]")`, "9"},
		{`return string.find("abc", "%f[%w]")`, "1"},
		{`return tostring(string.find("abc", "%f[%W]"))`, "4"},
		{`return tostring(string.find("", "%f[%z]"))`, "nil"},
	} {
		v, err := runGuarded(t, sandbox.DefaultLimits(), tc.src)
		if err != nil || v.String() != tc.want {
			t.Errorf("%s: got %v, %v, want %q", tc.src, v, err, tc.want)
		}
	}
}

// TestCompileRefusesLongScripts checks the source limit.
func TestCompileRefusesLongScripts(t *testing.T) {
	src := "return 1\n" + strings.Repeat("-", sandbox.MaxSourceBytes)
	if _, err := sandbox.Compile("test", src); err == nil || !strings.Contains(err.Error(), "more than the 65536") {
		t.Fatalf("got %v, want the limit", err)
	}
	if _, err := sandbox.Compile("test", src[:sandbox.MaxSourceBytes]); err != nil {
		t.Fatalf("a script of the limit's length: %v", err)
	}
}

// TestCompileRefusesLongConcatChains checks the bound on what gopher-lua compiles in quadratic
// time.
func TestCompileRefusesLongConcatChains(t *testing.T) {
	chain := func(n int) string { return "local a = 'x' return a" + strings.Repeat(" .. a", n-1) }
	if _, err := sandbox.Compile("test", chain(100)); err != nil {
		t.Fatalf("a chain of 100: %v", err)
	}
	if _, err := sandbox.Compile("test", "return function() return {"+chain(201)[len("local a = 'x' return "):]+"} end"); err == nil || !strings.Contains(err.Error(), "a chain of 201 .. operands") {
		t.Fatalf("a chain of 201 in a function: got %v", err)
	}
}
