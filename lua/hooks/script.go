package hooks

import (
	"errors"
	"fmt"
	"runtime"
	"weak"

	lua "github.com/yuin/gopher-lua"

	"github.com/filamq/fila/lua/sandbox"
)

// Hook names a queue hook.
type Hook uint8

const (
	// OnEnqueue classifies each message before it is stored.
	OnEnqueue Hook = iota
	// OnFailure decides retry or dead-letter when a delivery fails.
	OnFailure
)

var hookFunctions = [...]string{"on_enqueue", "on_failure"}

// function is the global function the hook's script must define.
func (h Hook) function() string { return hookFunctions[h] }

// String returns the hook's function name.
func (h Hook) String() string {
	if int(h) < len(hookFunctions) {
		return hookFunctions[h]
	}
	return fmt.Sprintf("Hook(%d)", uint8(h))
}

// Script is one compiled hook script. It holds no Lua state and may be shared by goroutines.
type Script struct {
	hook   Hook
	source string
	proto  *lua.FunctionProto
}

// Source returns the script's text.
func (s *Script) Source() string { return s.source }

// Hook returns the hook the script implements.
func (s *Script) Hook() Hook { return s.hook }

// CompileError is a script that does not compile, or that lacks its hook's function. Its
// message is the compiler's (line numbers included).
type CompileError struct{ Msg string }

func (e *CompileError) Error() string { return e.Msg }

// Compile compiles src as hook's script and checks, by running its top level once in r's
// sandbox, that it defines the hook's function. Queues with the same script share one Script:
// while one is in use, compiling the same source again returns it.
func (r *Runtime) Compile(hook Hook, src string) (*Script, error) {
	key := scriptKey{hook, src}
	r.mu.Lock()
	if w, ok := r.scripts[key]; ok {
		if s := w.Value(); s != nil {
			r.mu.Unlock()
			return s, nil
		}
	}
	r.mu.Unlock()
	s, err := r.compile(hook, src)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.scripts[key]; ok {
		if shared := w.Value(); shared != nil { // compiled meanwhile by another goroutine
			return shared, nil
		}
	}
	if r.scripts == nil {
		r.scripts = map[scriptKey]weak.Pointer[Script]{}
	}
	w := weak.Make(s)
	r.scripts[key] = w
	runtime.AddCleanup(s, r.forget, scriptRef{key, w})
	return s, nil
}

// scriptKey names a compiled script by what it was compiled from.
type scriptKey struct {
	hook   Hook
	source string
}

type scriptRef struct {
	key scriptKey
	w   weak.Pointer[Script]
}

// forget drops the cache entry of a script no longer in use (unless it names a newer one).
func (r *Runtime) forget(ref scriptRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.scripts[ref.key] == ref.w {
		delete(r.scripts, ref.key)
	}
}

func (r *Runtime) compile(hook Hook, src string) (*Script, error) {
	chunk := hook.function()
	proto, err := sandbox.Compile(chunk, src)
	if err != nil {
		return nil, &CompileError{Msg: err.Error()}
	}
	s := &Script{hook: hook, source: src, proto: proto}
	st, lim := r.take()
	err = r.checkDefines(st, lim, s)
	r.give(st, err != nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// checkDefines runs the script's top level on st, as its first call there would (load keeps
// what it defined for that call), and checks that it defines the hook's function.
func (r *Runtime) checkDefines(st *state, lim sandbox.Limits, s *Script) error {
	st.Start(lim.Timeout)
	_, err := st.load(s)
	st.Stop()
	st.unload(s)
	switch {
	case errors.Is(err, errNoFunction):
		return &CompileError{Msg: fmt.Sprintf("%s: the script does not define function %s(msg)", s.hook, s.hook.function())}
	case err != nil:
		return &CompileError{Msg: fmt.Sprintf("%s: running the script's top level: %v", s.hook, err)}
	}
	return nil
}

// errNoFunction is the script error of a top level that does not define the hook's function.
var errNoFunction = fmt.Errorf("%w: the script does not define function", sandbox.ErrScript)

func scriptErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sandbox.ErrScript}, args...)...)
}
