package hooks

import (
	"sync"

	lua "github.com/yuin/gopher-lua"

	"github.com/filamq/fila/lua/sandbox"
)

// ConfigReader reads the runtime config store for fila.get: the value, and whether the key is set.
type ConfigReader func(key string) (string, bool)

// envSize is the room a call's global environment starts with: a script defines a few
// functions (NewTable would make room for 32 entries and 32 array slots at every call).
const envSize = 4

// maxIdleStates bounds the states a Runtime keeps between calls; more are made when more
// goroutines call at once, and closed when given back.
const maxIdleStates = 16

// Runtime runs hooks on a pool of sandboxed states. It is safe for concurrent use.
type Runtime struct {
	config ConfigReader

	mu     sync.Mutex
	limits sandbox.Limits
	gen    uint64 // bumped by SetLimits: states of an older generation are not reused
	idle   []*state
}

// state is one pooled sandbox with the metatable of its call environments.
type state struct {
	*sandbox.State
	gen     uint64
	envMeta *lua.LTable // {__index = the sandbox's globals}
	loaded  map[*Script]*loaded
	msgs    [len(hookFunctions)]*lua.LTable // the msg argument of each hook, reused (see msgTable)
}

// msgFields are the fields of each hook's msg argument.
var msgFields = [len(hookFunctions)]map[lua.LValue]bool{
	OnEnqueue: {lua.LString("queue"): true, lua.LString("headers"): true, lua.LString("payload_size"): true,
		lua.LString("fairness_key"): true, lua.LString("weight"): true, lua.LString("delay_ms"): true,
		lua.LString("idempotency_key"): true},
	OnFailure: {lua.LString("id"): true, lua.LString("queue"): true, lua.LString("headers"): true,
		lua.LString("attempts"): true, lua.LString("error"): true, lua.LString("fairness_key"): true,
		lua.LString("attributes"): true},
}

// msgTable returns the table to pass a hook's msg in: the one of the last call, whose fields the
// call sets again, unless the script added a field or a metatable to it (it then starts anew, so
// that nothing a call adds reaches the next one and a table never grows across calls).
func (st *state) msgTable(h Hook) *lua.LTable {
	if m := st.msgs[h]; m != nil && m.Metatable == lua.LNil {
		clean := true
		m.ForEach(func(k, _ lua.LValue) { clean = clean && msgFields[h][k] })
		if clean {
			return m
		}
	}
	st.msgs[h] = st.L.CreateTable(0, len(msgFields[h]))
	return st.msgs[h]
}

// NewRuntime returns a Runtime with the given limits whose fila.get reads config (nil: every key
// is unset).
func NewRuntime(lim sandbox.Limits, config ConfigReader) *Runtime {
	if config == nil {
		config = func(string) (string, bool) { return "", false }
	}
	return &Runtime{config: config, limits: lim}
}

// SetLimits changes the limits of later calls (lua.* runtime config, applied without restart).
func (r *Runtime) SetLimits(lim sandbox.Limits) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lim == r.limits {
		return
	}
	r.limits = lim
	r.gen++
	for _, s := range r.idle {
		s.Close()
	}
	r.idle = nil
}

// Limits returns the current limits.
func (r *Runtime) Limits() sandbox.Limits {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limits
}

// Idle returns how many states the pool keeps now.
func (r *Runtime) Idle() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.idle)
}

func (r *Runtime) take() (*state, sandbox.Limits) {
	r.mu.Lock()
	lim, gen := r.limits, r.gen
	if n := len(r.idle); n > 0 {
		s := r.idle[n-1]
		r.idle[n-1] = nil
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		return s, lim
	}
	r.mu.Unlock()
	return r.newState(lim, gen), lim
}

// give returns a state to the pool; broken is true after a failed run, whose state is dropped.
func (r *Runtime) give(s *state, broken bool) {
	r.mu.Lock()
	keep := !broken && s.gen == r.gen && len(r.idle) < maxIdleStates
	if keep {
		r.idle = append(r.idle, s)
	}
	r.mu.Unlock()
	if !keep {
		s.Close()
	}
}

func (r *Runtime) newState(lim sandbox.Limits, gen uint64) *state {
	sb := sandbox.NewState(lim, map[string]func(L *lua.LState) *lua.LTable{"fila": r.filaModule})
	L := sb.L
	meta := L.NewTable()
	meta.RawSetString("__index", L.Get(lua.GlobalsIndex))
	return &state{State: sb, gen: gen, envMeta: meta}
}

// filaModule is the fila table: fila.get(key) returns the runtime config value or nil.
func (r *Runtime) filaModule(L *lua.LState) *lua.LTable {
	m := L.NewTable()
	m.RawSetString("get", L.NewFunction(func(L *lua.LState) int {
		if v, ok := r.config(L.CheckString(1)); ok {
			L.Push(lua.LString(v))
		} else {
			L.Push(lua.LNil)
		}
		return 1
	}))
	return m
}

// call runs script's hook function with the argument arg builds, within the time budget, and
// passes the hook's result to read (still within the state's lifetime). It returns read's error,
// or the script's.
func (r *Runtime) call(s *Script, arg func(L *lua.LState, m *lua.LTable) lua.LValue, read func(v lua.LValue) error) error {
	st, lim := r.take()
	err := r.run(st, lim, s, arg, read)
	r.give(st, err != nil)
	return err
}

func (r *Runtime) run(st *state, lim sandbox.Limits, s *Script, arg func(L *lua.LState, m *lua.LTable) lua.LValue, read func(v lua.LValue) error) error {
	st.Start(lim.Timeout)
	defer st.Stop()
	ld, err := st.load(s)
	if err != nil {
		return err
	}
	out, err := st.Call(ld.fn, 1, arg(st.L, st.msgTable(s.hook)))
	if err != nil {
		return err
	}
	ld.restore()
	return read(out[0])
}

// loaded is a script whose top level has run on a state: its global environment, the hook
// function, and the globals as the top level left them, put back after every call.
type loaded struct {
	env     *lua.LTable
	fn      *lua.LFunction
	globals map[lua.LString]lua.LValue
}

// maxLoaded bounds the scripts a state keeps loaded; beyond it the state forgets them all.
const maxLoaded = 64

// load returns script s loaded on the state, running its top level in a new environment the
// first time (within the budget already started).
func (st *state) load(s *Script) (*loaded, error) {
	if ld, ok := st.loaded[s]; ok {
		return ld, nil
	}
	L := st.L
	env := L.CreateTable(0, envSize)
	L.SetMetatable(env, st.envMeta)
	chunk := L.NewFunctionFromProto(s.proto)
	chunk.Env = env
	if _, err := st.Call(chunk, 0); err != nil {
		return nil, err
	}
	fn, ok := env.RawGetString(s.hook.function()).(*lua.LFunction)
	if !ok {
		return nil, scriptErrorf("the script does not define function %s", s.hook.function())
	}
	ld := &loaded{env: env, fn: fn, globals: map[lua.LString]lua.LValue{}}
	env.ForEach(func(k, v lua.LValue) {
		if ks, ok := k.(lua.LString); ok {
			ld.globals[ks] = v
		}
	})
	if st.loaded == nil || len(st.loaded) >= maxLoaded {
		st.loaded = map[*Script]*loaded{}
	}
	st.loaded[s] = ld
	return ld, nil
}

// restore puts the globals back as the top level left them: what a call wrote to a global does
// not survive it. (Global names are the script's own identifiers: without rawset, _G and setfenv
// a script cannot make them up, so the environment never grows beyond them.)
func (ld *loaded) restore() {
	var extra []lua.LValue
	ld.env.ForEach(func(k, _ lua.LValue) {
		if ks, ok := k.(lua.LString); !ok || ld.globals[ks] == nil {
			extra = append(extra, k)
		}
	})
	for _, k := range extra {
		ld.env.RawSet(k, lua.LNil)
	}
	for k, v := range ld.globals {
		if ld.env.RawGetString(string(k)) != v {
			ld.env.RawSetString(string(k), v)
		}
	}
}
