// Package sandbox is the one Lua sandbox of the server (gopher-lua), shared by the queue hooks
// (lua/hooks) and Rift's plugins (server/rift/plugin).
//
// A sandboxed state has the base functions without the ones that reach outside it or change what
// other code sees (dofile, loadfile, load, loadstring, require, module, getfenv, setfenv, rawset,
// collectgarbage, print, newproxy, _G), and the string (without dump), table and math libraries;
// no io, os, debug, package or coroutine. The libraries are read-only: a script cannot change
// string.upper for the next one, and getmetatable of a library or of a string answers false.
//
// Every run of script code has a time budget of CPU time (Run), enforced between any two
// instructions and inside the library functions that loop in Go, so `while true do end` and
// string.find(("a"):rep(300), "a*a*a*a*a*b") both end with ErrTimeout (after at most 1 1/8 times
// the budget when runs share a Thread's clock reading, plus a few microseconds). The pattern
// functions (find, match, gmatch, gsub) use a matcher of this package (Lua 5.1's patterns, with
// recursion bounded at 200 nested items: "pattern too complex") that asks the budget every
// few thousand steps; gopher-lua's own cannot be interrupted.
//
// The library functions that make strings or grow tables (string.rep, format, gsub, upper, lower,
// reverse, table.concat, insert, sort) and the .. operator (Compile rewrites each chain of .. into
// a call of a function of this package: concat.go) charge what they are about to allocate to the
// run: one string may not exceed Limits.MaxStringBytes and a run's charges together
// Limits.MaxCallBytes; either ends the run with a script error before the allocation.
// (string.sub and the captures of a match share the subject's bytes and allocate none.) What the
// VM allocates itself — table constructors and stores into tables, about 1 MiB per millisecond —
// is bounded by the time budget. The call stack and the value stack ("registry") are bounded
// (Limits), so deep recursion or unpack of a huge range ends with a script error.
//
// Compile refuses a source longer than MaxSourceBytes (64 KiB) and a chain of more than 200 ..
// operands, so compiling, which no budget interrupts, costs a bounded time.
package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// Limits bound what one state and one run may use.
type Limits struct {
	// Timeout is the time budget of one Run.
	Timeout time.Duration
	// CallStackSize bounds nested calls.
	CallStackSize int
	// RegistrySize is the initial size of the value stack; RegistryMaxSize bounds its growth.
	RegistrySize, RegistryMaxSize int
	// MaxStringBytes bounds one string a library function makes (string.rep, string.format,
	// string.gsub, table.concat, ...).
	MaxStringBytes int
	// MaxCallBytes bounds what the library functions allocate in one run, all together
	// (strings they make, table slots table.insert adds).
	MaxCallBytes int
}

// DefaultLimits returns the limits of the runtime config's defaults (lua.timeout_ms 10).
func DefaultLimits() Limits {
	return Limits{Timeout: 10 * time.Millisecond, CallStackSize: 200, RegistrySize: 1024, RegistryMaxSize: 64 * 1024,
		MaxStringBytes: 1 << 20, MaxCallBytes: 8 << 20}
}

// MaxSourceBytes is the longest script Compile accepts: compiling costs time that grows faster
// than the source (gopher-lua's compiler is quadratic in places), and no budget interrupts it.
const MaxSourceBytes = 64 << 10

// registryGrowStep is how many slots the value stack grows by at a time: growth copies the stack,
// so a small step makes a run to RegistryMaxSize cost quadratic time.
const registryGrowStep = 4096

// ErrTimeout reports a run that exceeded its time budget.
var ErrTimeout = errors.New("script timed out")

// ErrScript reports a run that raised an error (or a state limit that stopped it).
var ErrScript = errors.New("script error")

// removed are the base functions a sandboxed state does not have.
var removed = []string{"dofile", "loadfile", "load", "loadstring", "require", "module", "getfenv", "setfenv",
	"rawset", "collectgarbage", "print", "_printregs", "newproxy", "_G"}

// State is a sandboxed Lua state. It is not safe for concurrent use.
type State struct {
	// L is the gopher-lua state; run its code with Run only.
	L         *lua.LState
	budget    budget
	timeout   time.Duration
	maxString int
	out       []lua.LValue // Call's results, reused
}

// NewState returns a sandboxed state with the given limits. modules are added as read-only
// global tables (for example the hooks' fila module), built on the new state by their function.
func NewState(lim Limits, modules map[string]func(L *lua.LState) *lua.LTable) *State {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: lim.CallStackSize,
		RegistrySize: lim.RegistrySize, RegistryMaxSize: lim.RegistryMaxSize, RegistryGrowStep: registryGrowStep})
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.StringLibName, lua.OpenString}, {lua.TabLibName, lua.OpenTable}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, f := range removed {
		L.SetGlobal(f, lua.LNil)
	}
	s := &State{L: L, maxString: lim.MaxStringBytes}
	s.budget.maxBytes = lim.MaxCallBytes
	str := L.GetGlobal(lua.StringLibName).(*lua.LTable)
	str.RawSetString("dump", lua.LNil)
	s.installLibs(L, str, L.GetGlobal(lua.TabLibName).(*lua.LTable))
	L.SetGlobal(concatFunction, L.NewFunction(s.concat))
	if mt, ok := L.GetMetatable(lua.LString("")).(*lua.LTable); ok {
		mt.RawSetString("__metatable", lua.LFalse)
	}
	for _, name := range []string{lua.StringLibName, lua.TabLibName, lua.MathLibName} {
		L.SetGlobal(name, ReadOnly(L, L.GetGlobal(name).(*lua.LTable)))
	}
	for name, build := range modules {
		L.SetGlobal(name, ReadOnly(L, build(L)))
	}
	return s
}

// Close releases the state.
func (s *State) Close() { s.L.Close() }

// ReadOnly returns an empty table that reads through to t and refuses writes; its metatable is
// protected.
func ReadOnly(L *lua.LState, t *lua.LTable) *lua.LTable {
	p, mt := L.NewTable(), L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("attempt to change a read-only table (field %s)", L.ToStringMeta(L.Get(2)).String())
		return 0
	}))
	mt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(p, mt)
	return p
}

// Compile parses and compiles a chunk; a syntax error names chunk and the line. A source longer
// than MaxSourceBytes is refused.
func Compile(chunk, src string) (*lua.FunctionProto, error) {
	if len(src) > MaxSourceBytes {
		return nil, fmt.Errorf("%s: the script is %d bytes long, more than the %d a script may have", chunk, len(src), MaxSourceBytes)
	}
	stmts, err := parseChunk(chunk, src)
	if err != nil {
		return nil, err
	}
	if err := rewriteConcat(chunk, stmts); err != nil {
		return nil, err
	}
	proto, err := lua.Compile(stmts, chunk)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", chunk, err)
	}
	// A chunk is called without arguments: it needs no Lua 5.0 "arg" table, which gopher-lua
	// would otherwise allocate at every run.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	compact(proto)
	return proto, nil
}

// Run calls fn with args within the time budget and returns its first nret results (nil where
// it returned fewer; valid until the next Run or Call). Its error wraps ErrTimeout or ErrScript
// and carries the script's message. After an error the state is usable, but a caller that pools
// states should drop it.
func (s *State) Run(timeout time.Duration, fn *lua.LFunction, nret int, args ...lua.LValue) ([]lua.LValue, error) {
	s.Start(timeout)
	defer s.Stop()
	return s.Call(fn, nret, args...)
}

// Start begins a time budget for the Calls that follow it, until Stop. The goroutine stays on
// its OS thread in between (the budget is the thread's CPU time).
func (s *State) Start(timeout time.Duration) { s.StartOn(nil, timeout) }

// StartOn is Start on a thread the caller holds (nil: as Start), so that a series of runs reads
// the thread's CPU clock once rather than at every start (see Thread).
func (s *State) StartOn(t *Thread, timeout time.Duration) {
	s.budget.start(t, timeout)
	s.timeout = timeout
}

// Stop ends the budget Start began.
func (s *State) Stop() { s.budget.stop() }

// Call is Run within the budget of the last Start. The results are valid until the next Call.
func (s *State) Call(fn *lua.LFunction, nret int, args ...lua.LValue) ([]lua.LValue, error) {
	L, b := s.L, &s.budget
	L.SetContext(b)
	defer L.RemoveContext()
	L.Push(fn)
	for _, a := range args {
		L.Push(a)
	}
	if err := L.PCall(len(args), nret, nil); err != nil {
		if b.expired {
			return nil, fmt.Errorf("%w after %v", ErrTimeout, s.timeout)
		}
		return nil, fmt.Errorf("%w: %s", ErrScript, message(err))
	}
	out := slices.Grow(s.out[:0], nret)[:nret]
	for i := range out {
		out[i] = L.Get(-nret + i)
	}
	L.Pop(nret)
	s.out = out
	return out, nil
}

// compact copies the slices of a compiled function tree to their length: gopher-lua's compiler
// leaves them with room for 1,024 instructions and positions (12 KiB a function), which every
// queue hook would keep for its lifetime.
func compact(p *lua.FunctionProto) {
	p.Code = slices.Clone(p.Code)
	p.DbgSourcePositions = slices.Clone(p.DbgSourcePositions)
	p.Constants = slices.Clone(p.Constants)
	for _, c := range p.FunctionPrototypes {
		compact(c)
	}
}

func parseChunk(chunk, src string) ([]ast.Stmt, error) {
	stmts, err := parse.Parse(strings.NewReader(src), chunk)
	if err != nil {
		msg := strings.Join(strings.Fields(err.Error()), " ")
		if strings.Contains(msg, " at EOF") { // name the line the script ends on, as for other errors
			msg = strings.Replace(msg, " at EOF", fmt.Sprintf(" line:%d at the end of the script", strings.Count(src, "\n")+1), 1)
		}
		return nil, errors.New(msg)
	}
	return stmts, nil
}

// message is a Lua error's text without gopher-lua's stack traceback.
func message(err error) string {
	var api *lua.ApiError
	if errors.As(err, &api) && api.Object != nil {
		return api.Object.String()
	}
	return err.Error()
}
