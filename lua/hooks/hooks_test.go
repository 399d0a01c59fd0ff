package hooks_test

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/lua/sandbox"
)

// newRuntime has a generous time budget, so that a loaded test machine never times out a
// script whose test is not about the budget; strictRuntime has the default one.
func newRuntime(t *testing.T) *hooks.Runtime {
	t.Helper()
	lim := sandbox.DefaultLimits()
	lim.Timeout = 5 * time.Second
	return hooks.NewRuntime(lim, config)
}

func strictRuntime(t *testing.T) *hooks.Runtime {
	t.Helper()
	return hooks.NewRuntime(sandbox.DefaultLimits(), config)
}

func config(k string) (string, bool) {
	if k == "lua.env.tier.acme" {
		return "gold", true
	}
	return "", false
}

func compile(t *testing.T, r *hooks.Runtime, h hooks.Hook, src string) *hooks.Script {
	t.Helper()
	s, err := r.Compile(h, src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var input = hooks.EnqueueInput{Queue: "jobs", Headers: map[string]string{"tenant": "acme"}, PayloadSize: 3,
	FairnessKey: "client-claim", Weight: 1}

func TestOnEnqueueOverridesEveryReturnedField(t *testing.T) {
	r := newRuntime(t)
	s := compile(t, r, hooks.OnEnqueue, `
local weights = { gold = 5 }
function on_enqueue(msg)
  local tier = fila.get("tier." .. msg.headers.tenant) or "free"
  return { fairness_key = msg.headers.tenant, weight = weights[tier] or 1, delay_ms = msg.payload_size * 10,
           attributes = { tier = tier, queue = msg.queue } }
end`)
	c, err := r.OnEnqueue(s, input)
	if err != nil {
		t.Fatal(err)
	}
	want := hooks.Classification{FairnessKey: "acme", Weight: 5, DelayMs: 30, Attributes: map[string]string{"tier": "gold", "queue": "jobs"}}
	if c.FairnessKey != want.FairnessKey || c.Weight != want.Weight || c.DelayMs != want.DelayMs || !maps.Equal(c.Attributes, want.Attributes) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
}

func TestOnEnqueueReturningNothingKeepsTheProducersValues(t *testing.T) {
	r := newRuntime(t)
	for _, src := range []string{`function on_enqueue(msg) end`, `function on_enqueue(msg) return {} end`} {
		c, err := r.OnEnqueue(compile(t, r, hooks.OnEnqueue, src), input)
		if err != nil || c.FairnessKey != "client-claim" || c.Weight != 1 || c.Attributes != nil {
			t.Fatalf("%s: %+v %v", src, c, err)
		}
	}
}

func TestInvalidReturnsAreScriptErrors(t *testing.T) {
	r := newRuntime(t)
	for _, ret := range []string{`"x"`, `42`, `{fairness_key = 1}`, `{fairness_key = ""}`, `{weight = 0}`, `{weight = 1.5}`,
		`{weight = "2"}`, `{delay_ms = -1}`, `{attributes = "x"}`, `{attributes = {a = 1}}`, `{attributes = {[1] = "x"}}`} {
		s := compile(t, r, hooks.OnEnqueue, "function on_enqueue(msg) return "+ret+" end")
		if _, err := r.OnEnqueue(s, input); !errors.Is(err, sandbox.ErrScript) {
			t.Errorf("return %s: %v, want a script error", ret, err)
		}
	}
}

func TestCompileErrorsNameTheLine(t *testing.T) {
	r := strictRuntime(t)
	for src, want := range map[string]string{
		"function on_enqueue(msg)\n  return {\nend":       "line:3",
		"function other(msg) end":                         "does not define function on_enqueue",
		"local x = 1\nerror('boom at top')":               "boom at top",
		"on_enqueue = 5":                                  "does not define function on_enqueue",
		"function on_enqueue(msg) end\nwhile true do end": "timed out",
	} {
		_, err := r.Compile(hooks.OnEnqueue, src)
		var ce *hooks.CompileError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a compile error with %q", src, err, want)
		}
	}
	if _, err := r.Compile(hooks.OnFailure, "function on_enqueue(msg) end"); err == nil {
		t.Error("an on_failure script without on_failure compiled")
	}
}

// Every way out of the sandbox fails as a script error, and the sandbox still works after it.
func TestSandboxEscapesFail(t *testing.T) {
	r := newRuntime(t)
	for _, expr := range []string{
		`io.open("/etc/passwd")`, `os.exit(1)`, `os.getenv("HOME")`, `require("os")`, `load("return 1")()`,
		`loadstring("return 1")()`, `dofile("/etc/passwd")`, `loadfile("/etc/passwd")`, `debug.getinfo(1)`,
		`setfenv(1, {})`, `getfenv(1)`, `collectgarbage("count")`, `coroutine.create(function() end)`,
		`string.dump(on_enqueue)`, `package.loaded`, `_G.x`, `rawset(string, "upper", nil)`, `newproxy(true)`,
		`print("x")`, `module("m")`, `setmetatable(string, {})`, `getmetatable("").__index.upper`,
		`(function() string.upper = nil end)()`, `(function() fila.get = nil end)()`, `(function() math.pi = 3 end)()`,
	} {
		s := compile(t, r, hooks.OnEnqueue, "function on_enqueue(msg) local _ = "+expr+" end")
		if _, err := r.OnEnqueue(s, input); !errors.Is(err, sandbox.ErrScript) {
			t.Errorf("%s: %v, want a script error", expr, err)
		}
	}
	ok := compile(t, r, hooks.OnEnqueue, `function on_enqueue(msg) return {fairness_key = string.upper(msg.headers.tenant) .. math.floor(math.pi)} end`)
	if c, err := r.OnEnqueue(ok, input); err != nil || c.FairnessKey != "ACME3" {
		t.Fatalf("after the escapes: %+v %v", c, err)
	}
}

// Globals a call writes are gone at the next call, including the top level's.
func TestGlobalsDoNotSurviveACall(t *testing.T) {
	r := newRuntime(t)
	s := compile(t, r, hooks.OnEnqueue, `
calls = (calls or 0) + 1
helper = function() return "h" end
function on_enqueue(msg)
  if helper() ~= "h" then error("helper was not restored") end
  helper = nil
  if msg.extra or msg.idempotency_key then error("msg kept a field of an earlier call") end
  msg.extra = 1
  on_enqueue_copy = on_enqueue
  seen = (seen or 0) + 1
  headers_written = msg.headers
  msg.headers.tenant = "changed"
  return { fairness_key = "k" .. calls .. "-" .. seen }
end`)
	for i := 0; i < 3; i++ {
		c, err := r.OnEnqueue(s, input)
		if err != nil || c.FairnessKey != "k1-1" {
			t.Fatalf("call %d: %+v %v", i, c, err)
		}
	}
	if input.Headers["tenant"] != "acme" {
		t.Fatal("the script changed the producer's headers")
	}
}

func TestAnInfiniteLoopTimesOut(t *testing.T) {
	r := strictRuntime(t)
	for _, body := range []string{`while true do end`, `while true do pcall(function() while true do end end) end`,
		`local function f() return f() end return f()`} {
		s := compile(t, r, hooks.OnEnqueue, "function on_enqueue(msg) "+body+" end")
		_, err := r.OnEnqueue(s, input)
		if body == `local function f() return f() end return f()` {
			continue // a tail call loops without growing the stack: a timeout or an error both end it
		}
		if !errors.Is(err, sandbox.ErrTimeout) {
			t.Errorf("%s: %v, want a timeout", body, err)
		}
	}
}

// Scripts that try to take memory without bound are stopped, not the server.
func TestMemoryBombsAreStopped(t *testing.T) {
	r := strictRuntime(t)
	for _, body := range []string{
		`local t = {} local i = 0 while true do i = i + 1 t[i] = i end`,
		`local t = {} local i = 0 while true do i = i + 1 t["k" .. i] = {i} end`,
		`return {fairness_key = string.rep("x", 1e9)}`,
		`return {fairness_key = ("xy"):rep(1e9)}`,
		`local s = "x" while true do s = s .. s end`,
		`return unpack({}, 1, 1e8)`,
		`local function f(n) return 1 + f(n + 1) end return f(1)`,
		`return string.byte(string.rep("x", 1e6), 1, -1)`,
	} {
		s := compile(t, r, hooks.OnEnqueue, "function on_enqueue(msg) "+body+" end")
		start := time.Now()
		_, err := r.OnEnqueue(s, input)
		t.Logf("%s: %v in %v", body, err, time.Since(start))
		if !errors.Is(err, sandbox.ErrTimeout) && !errors.Is(err, sandbox.ErrScript) {
			t.Errorf("%s: %v, want a script error or timeout", body, err)
		}
	}
}

func TestTimeoutFollowsTheLimits(t *testing.T) {
	r := newRuntime(t)
	s := compile(t, r, hooks.OnEnqueue, `function on_enqueue(msg) local n = 0 for i = 1, 3e6 do n = n + i end return {weight = 1} end`)
	lim := sandbox.DefaultLimits()
	lim.Timeout = time.Minute
	r.SetLimits(lim)
	if _, err := r.OnEnqueue(s, input); err != nil {
		t.Fatalf("with a minute: %v", err)
	}
	lim.Timeout = time.Microsecond
	r.SetLimits(lim)
	if _, err := r.OnEnqueue(s, input); !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("with a microsecond: %v", err)
	}
}

func TestOnFailureDecides(t *testing.T) {
	r := newRuntime(t)
	s := compile(t, r, hooks.OnFailure, `
function on_failure(msg)
  if msg.error == "fatal" then return {action = "dlq"} end
  if msg.error == "later" then return {action = "retry", delay_ms = msg.attempts * 1000} end
  if msg.error == "bad" then return {action = "maybe"} end
  if msg.attributes.tier ~= "gold" or msg.headers.tenant ~= "acme" or msg.id ~= "id-1" then error("wrong input") end
end`)
	in := hooks.FailureInput{ID: "id-1", Queue: "jobs", Headers: map[string]string{"tenant": "acme"}, Attempts: 3,
		FairnessKey: "acme", Attributes: map[string]string{"tier": "gold"}}
	for errText, want := range map[string]struct {
		d       hooks.FailureDecision
		decided bool
		err     bool
	}{
		"fatal": {d: hooks.FailureDecision{Action: hooks.DeadLetter}, decided: true},
		"later": {d: hooks.FailureDecision{Action: hooks.Retry, DelayMs: 3000, HasDelay: true}, decided: true},
		"other": {},
		"bad":   {err: true},
	} {
		in.Error = errText
		d, decided, err := r.OnFailure(s, in)
		if d != want.d || decided != want.decided || (err != nil) != want.err {
			t.Errorf("%s: %+v %v %v, want %+v", errText, d, decided, err, want)
		}
	}
}

func TestThePoolKeepsFewStates(t *testing.T) {
	r := newRuntime(t)
	s := compile(t, r, hooks.OnEnqueue, `function on_enqueue(msg) return nil end`)
	for range 100 {
		if _, err := r.OnEnqueue(s, input); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.Idle(); n != 1 {
		t.Fatalf("%d idle states after sequential calls, want 1", n)
	}
}

func BenchmarkOnEnqueue(b *testing.B) {
	r := hooks.NewRuntime(sandbox.DefaultLimits(), nil)
	s, err := r.Compile(hooks.OnEnqueue, `function on_enqueue(msg) return { fairness_key = msg.headers.tenant, weight = 2 } end`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.OnEnqueue(s, input); err != nil {
			b.Fatal(err)
		}
	}
}

// typicalHook is the bench tool's hook (tools/bench/lua.go): tenant fairness by header, a weight
// per tier, an attribute.
const typicalHook = `
local weights = { gold = 3 }
function on_enqueue(msg)
  local tenant = msg.headers.group or "anonymous"
  local tier = (tenant == "0") and "gold" or "free"
  return { fairness_key = tenant, weight = weights[tier] or 1, attributes = { tier = tier } }
end`

func BenchmarkOnEnqueueTypical(b *testing.B) {
	r := hooks.NewRuntime(sandbox.DefaultLimits(), nil)
	s, err := r.Compile(hooks.OnEnqueue, typicalHook)
	if err != nil {
		b.Fatal(err)
	}
	in := hooks.EnqueueInput{Queue: "q", Headers: map[string]string{"group": "0"}, PayloadSize: 1024, FairnessKey: "default", Weight: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.OnEnqueue(s, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateMemory reports what the pool's interpreter states and compiled scripts cost: the
// live heap of 100 sandboxed states, and of 1,000 compiled scripts (one per queue hook).
func BenchmarkStateMemory(b *testing.B) {
	src := `function on_enqueue(msg) return { fairness_key = msg.headers.tenant, weight = 2 } end`
	for b.Loop() {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		states := make([]*sandbox.State, 100)
		for i := range states {
			states[i] = sandbox.NewState(sandbox.DefaultLimits(), nil)
		}
		mid := heap()
		r := hooks.NewRuntime(sandbox.DefaultLimits(), nil)
		scripts := make([]*hooks.Script, 1000)
		for i := range scripts {
			s, err := r.Compile(hooks.OnEnqueue, fmt.Sprintf("%s -- %d", src, i)) // distinct: not shared
			if err != nil {
				b.Fatal(err)
			}
			scripts[i] = s
		}
		after := heap()
		b.ReportMetric(float64(mid-before)/100, "B/state")
		b.ReportMetric(float64(after-mid)/1000, "B/script")
		runtime.KeepAlive(states)
		runtime.KeepAlive(scripts)
	}
}
