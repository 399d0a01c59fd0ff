// Package hooks runs a queue's Lua hooks, on_enqueue and on_failure (concepts.md, "Lua hooks"),
// in the server's sandbox (server/sandbox).
//
// A Script is compiled once per script version (Compile) and holds no Lua state. A Runtime
// keeps a pool of sandboxed states shared by every queue; each call takes a state, runs the
// script's top level in a fresh global environment (so nothing a call writes survives it), calls
// the hook and gives the state back. A state is used by one goroutine at a time. The broker
// calls the hooks on the leader, before the command that carries their decision is proposed;
// a replay never runs them.
//
// Errors wrap sandbox.ErrScript (the script raised, returned a wrong type, or broke a limit) or
// sandbox.ErrTimeout (the budget of lua.timeout_ms ran out).
package hooks
