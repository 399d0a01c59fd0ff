package hooks

import (
	"fmt"
	"slices"
	"sync"
	"weak"

	lua "github.com/yuin/gopher-lua"

	"github.com/filamq/fila/lua/sandbox"
)

// ConfigReader reads the runtime config store for fila.get: the value, and whether the key is set.
// It is asked only for keys under EnvPrefix.
type ConfigReader func(key string) (string, bool)

// EnvPrefix is the namespace of the runtime config that scripts read: fila.get(k) returns the
// value of the key EnvPrefix+k ("lua.env.k"), the values an operator publishes to scripts, and
// nothing else of the config (no setting, no secret).
const EnvPrefix = "lua.env."

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
	// scripts are the compiled scripts in use, by source (see Compile).
	scripts map[scriptKey]weak.Pointer[Script]
}

// state is one pooled sandbox with the metatable of its call environments.
type state struct {
	*sandbox.State
	gen     uint64
	envMeta *lua.LTable                     // {__index = the sandbox's globals}
	chunks  map[*Script]*lua.LFunction      // each script's top level, in its own environment
	keys    []lua.LValue                    // unload's, reused
	msgs    [len(hookFunctions)]reusedTable // the msg argument of each hook (see msgTable)
	headers [len(hookFunctions)]reusedTable // its headers field (see headersTable)
	values  valueCache
}

// valueCache keeps the Lua value of the last string or number put in each of a few msg fields:
// successive messages of a queue mostly repeat them, and making a Lua value of a Go string or
// number allocates.
type valueCache struct {
	strs [slotStrings]struct {
		s string
		v lua.LValue
	}
	nums [slotNumbers]struct {
		n float64
		v lua.LValue
	}
}

// The fields valueCache keeps.
const (
	slotQueue = iota
	slotFairnessKey
	slotStrings
)

const (
	slotPayloadSize = iota
	slotWeight
	slotDelay
	slotNumbers
)

func (c *valueCache) str(slot int, s string) lua.LValue {
	e := &c.strs[slot]
	if e.v == nil || e.s != s {
		e.s, e.v = s, lua.LString(s)
	}
	return e.v
}

func (c *valueCache) num(slot int, n float64) lua.LValue {
	e := &c.nums[slot]
	if e.v == nil || e.n != n {
		e.n, e.v = n, lua.LNumber(n)
	}
	return e.v
}

// msgFields are the fields of each hook's msg argument, in the order the hook sets them; the
// optional ones (nil for some messages) come last.
var msgFields = [len(hookFunctions)]struct {
	always, optional []string
}{
	OnEnqueue: {always: []string{"queue", "headers", "payload_size", "fairness_key", "weight", "delay_ms"},
		optional: []string{"idempotency_key"}},
	OnFailure: {always: []string{"id", "queue", "headers", "attempts", "error", "fairness_key", "attributes"}},
}

// reuseLimit is how many calls a reused table serves before a new one replaces it: a script can
// add a key and remove it again, which gopher-lua's tables remember, so a table is not kept for
// ever.
const reuseLimit = 1024

// reusedTable is a table that the calls on a state pass to their hooks again and again instead of
// making a new one for each call (a table costs a few allocations, and the garbage collector's
// time), as long as no call changed its shape.
type reusedTable struct {
	t    *lua.LTable
	keys []string   // the keys the table was made with, in their order
	last lua.LValue // the last of them
	uses int
}

// reusable reports whether the table still has the keys it was made with (plus optional ones)
// and nothing else a script added: no metatable, no array part, no key after the last one it
// was made with. (gopher-lua keeps the keys of a table in the order they were first set.)
func (rt *reusedTable) reusable(optional []string) bool {
	t := rt.t
	if t == nil || t.Metatable != lua.LNil || rt.uses >= reuseLimit {
		return false
	}
	if k, _ := t.Next(lua.LNil); k != lua.LNil && k.Type() != lua.LTString {
		return false // an array part
	}
	if rt.last == nil {
		k, _ := t.Next(lua.LNil)
		return k == lua.LNil
	}
	for k := rt.last; ; {
		if k, _ = t.Next(k); k == lua.LNil {
			return true
		}
		if s, ok := k.(lua.LString); !ok || !slices.Contains(optional, string(s)) {
			return false
		}
	}
}

// renew makes a new table for keys (and n more).
func (rt *reusedTable) renew(L *lua.LState, keys []string, n int) *lua.LTable {
	rt.t, rt.keys, rt.last, rt.uses = L.CreateTable(0, len(keys)+n), append(rt.keys[:0], keys...), nil, 0
	if len(keys) > 0 {
		rt.last = lua.LString(keys[len(keys)-1])
	}
	return rt.t
}

// msgTable returns the table to pass a hook's msg in: the one of the last call, whose fields the
// call sets again, unless a script changed its shape (it then starts anew, so that nothing a
// call adds reaches the next one and a table never grows across calls).
func (st *state) msgTable(h Hook) *lua.LTable {
	rt := &st.msgs[h]
	if !rt.reusable(msgFields[h].optional) {
		return rt.renew(st.L, msgFields[h].always, len(msgFields[h].optional))
	}
	rt.uses++
	return rt.t
}

// maxReusedHeaders is the most headers a reused headers table holds (keys are compared one by
// one).
const maxReusedHeaders = 8

// headersTable returns a table holding m for hook h's msg.headers: the last call's when it was
// made with the same keys and no script changed its shape, else a new one.
func (st *state) headersTable(h Hook, m map[string]string) *lua.LTable {
	rt := &st.headers[h]
	if len(m) > maxReusedHeaders {
		rt.t = nil
		return stringTable(st.L, m)
	}
	same := len(rt.keys) == len(m) && rt.reusable(nil)
	for _, k := range rt.keys { // as many keys, all of them in m: the same keys
		if !same {
			break
		}
		_, same = m[k]
	}
	t := rt.t
	if same {
		rt.uses++
	} else {
		keys := rt.keys[:0]
		for k := range m {
			keys = append(keys, k)
		}
		t = rt.renew(st.L, keys, 0)
	}
	for _, k := range rt.keys { // in the order the table was made with (see reusable)
		t.RawSetString(k, lua.LString(m[k]))
	}
	return t
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

// filaModule is the fila table: fila.get(key) returns the value of runtime config key
// EnvPrefix+key, or nil.
func (r *Runtime) filaModule(L *lua.LState) *lua.LTable {
	m := L.NewTable()
	m.RawSetString("get", L.NewFunction(func(L *lua.LState) int {
		if v, ok := r.config(EnvPrefix + L.CheckString(1)); ok {
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
func (r *Runtime) call(s *Script, arg argFunc, read func(v lua.LValue) error) error {
	b := Batch{r: r}
	defer b.Close()
	return b.call(s, arg, read)
}

// argFunc fills a hook's msg table m on state st and returns the argument to pass.
type argFunc func(st *state, m *lua.LTable) lua.LValue

// A Batch makes a series of hook calls from one goroutine on one pooled state and one OS thread:
// the calls share one take from the pool and one reading of the thread's CPU clock (see
// sandbox.Thread) instead of paying for them each. The goroutine holds its OS thread from the
// first call until Close, so it should not block in between. A Batch is not safe for
// concurrent use; Close it when done.
type Batch struct {
	r      *Runtime
	st     *state
	lim    sandbox.Limits
	thread sandbox.Thread
}

// Batch begins a batch of calls on r.
func (r *Runtime) Batch() *Batch { return &Batch{r: r} }

// Close gives the batch's state back and releases its thread.
func (b *Batch) Close() {
	if b.st != nil {
		b.r.give(b.st, false)
		b.st = nil
	}
	b.thread.Release()
}

func (b *Batch) call(s *Script, arg argFunc, read func(v lua.LValue) error) error {
	if b.st == nil {
		b.st, b.lim = b.r.take()
		b.thread.Hold()
	}
	err := b.st.run(b.lim, &b.thread, s, arg, read)
	if err != nil { // a failed run's state is dropped; a later call takes another
		b.r.give(b.st, true)
		b.st = nil
	}
	return err
}

func (st *state) run(lim sandbox.Limits, t *sandbox.Thread, s *Script, arg argFunc, read func(v lua.LValue) error) error {
	st.StartOn(t, lim.Timeout)
	defer st.Stop()
	fn, err := st.load(s)
	if err != nil {
		return err
	}
	out, err := st.Call(fn, 1, arg(st, st.msgTable(s.hook)))
	if err != nil {
		return err
	}
	err = read(out[0])
	st.unload(s)
	return err
}

// maxChunks bounds the scripts a state keeps a chunk of; beyond it the state forgets them all.
const maxChunks = 64

// load runs script s's top level in an empty global environment (within the budget already
// started) and returns the hook function it defined. Every call loads the script anew, so that
// nothing a call makes or changes — a global, a table or a local variable of the top level —
// is seen by the next call, on this state or another, for this queue or another with the same
// script. The chunk (the function of the top level, which has no upvalues) and its environment
// table are kept for the next call, the environment emptied (see unload): making them costs a
// few allocations, and the maps gopher-lua keeps for a table's string keys.
func (st *state) load(s *Script) (*lua.LFunction, error) {
	L := st.L
	chunk := st.chunks[s]
	if chunk == nil {
		if st.chunks == nil || len(st.chunks) >= maxChunks {
			st.chunks = map[*Script]*lua.LFunction{}
		}
		env := L.CreateTable(0, envSize)
		L.SetMetatable(env, st.envMeta)
		chunk = L.NewFunctionFromProto(s.proto)
		chunk.Env = env
		st.chunks[s] = chunk
	}
	if _, err := st.Call(chunk, 0); err != nil {
		return nil, err
	}
	fn, ok := chunk.Env.RawGetString(s.hook.function()).(*lua.LFunction)
	if !ok {
		return nil, fmt.Errorf("%w %s", errNoFunction, s.hook.function())
	}
	return fn, nil
}

// unload empties the environment a call of s left. (Global names are the script's own
// identifiers: without rawset, _G and setfenv a script cannot make them up, so the keys
// gopher-lua's table remembers never grow beyond them.)
func (st *state) unload(s *Script) {
	chunk := st.chunks[s]
	if chunk == nil {
		return
	}
	env := chunk.Env
	for k, _ := env.Next(lua.LNil); k != lua.LNil; k, _ = env.Next(k) {
		st.keys = append(st.keys, k)
	}
	for _, k := range st.keys {
		env.RawSet(k, lua.LNil)
	}
	clear(st.keys)
	st.keys = st.keys[:0]
}
