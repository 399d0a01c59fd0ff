// Package hooks runs a queue's Lua hooks, on_enqueue and on_failure (concepts.md, "Lua hooks"),
// in the server's sandbox (lua/sandbox).
//
// A Script is compiled once per script version (Compile; queues with the same source share it)
// and holds no Lua state. A Runtime keeps a pool of sandboxed states shared by every queue; each
// call takes a state, calls the hook and gives the state back (a Batch keeps one state for a
// series of calls, such as the messages of one Enqueue). Every call runs the script's top level
// anew in an empty global environment, then the hook it defined: nothing a call makes or changes
// (a global, a table or local variable of the top level) survives it, so calls share no Lua value
// — not the calls of one queue, nor those of two queues with the same script. A state keeps only
// the chunk function and its environment table for reuse, emptied after each call. A state is
// used by one goroutine at a time. The broker calls the hooks on the leader, before the command
// that carries their decision is proposed; a replay never runs them.
//
// fila.get(k) reads the runtime config key EnvPrefix+k (lua.env.k) only. on_enqueue's result is
// bounded: MaxAttributes attributes of MaxAttributeBytes together.
//
// Errors wrap sandbox.ErrScript (the script raised, returned a wrong type, or broke a limit) or
// sandbox.ErrTimeout (the budget of lua.timeout_ms ran out).
package hooks
