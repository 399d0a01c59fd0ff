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

// call runs script's top level in a fresh environment, then its hook function with the argument
// arg builds, within one time budget, and passes the hook's result to read (still within the
// state's lifetime). It returns read's error, or the script's.
func (r *Runtime) call(s *Script, arg func(L *lua.LState) lua.LValue, read func(v lua.LValue) error) error {
	st, lim := r.take()
	err := r.run(st, lim, s, arg, read)
	r.give(st, err != nil)
	return err
}

func (r *Runtime) run(st *state, lim sandbox.Limits, s *Script, arg func(L *lua.LState) lua.LValue, read func(v lua.LValue) error) error {
	L := st.L
	env := L.CreateTable(0, envSize)
	L.SetMetatable(env, st.envMeta)
	chunk := L.NewFunctionFromProto(s.proto)
	chunk.Env = env
	st.Start(lim.Timeout)
	defer st.Stop()
	if _, err := st.Call(chunk, 0); err != nil {
		return err
	}
	fn, ok := env.RawGetString(s.hook.function()).(*lua.LFunction)
	if !ok {
		return scriptErrorf("the script no longer defines function %s", s.hook.function())
	}
	out, err := st.Call(fn, 1, arg(L))
	if err != nil {
		return err
	}
	return read(out[0])
}
