// Package hooks runs a queue's Lua hooks, on_enqueue and on_failure (concepts.md, "Lua hooks"),
// in the server's sandbox (server/sandbox).
//
// A Script is compiled once per script version (Compile; queues with the same source share it)
// and holds no Lua state. A Runtime keeps a pool of sandboxed states shared by every queue; each
// call takes a state, calls the hook and gives the state back (a Batch keeps one state for a
// series of calls, such as the messages of one Enqueue). A state runs a script's top level once, in a global environment
// of the script's own, and keeps it loaded (up to 64 scripts a state); after every call the
// globals are put back as the top level left them, so nothing a call writes to a global survives
// it. Values the top level made (its tables, its local variables) are shared by the later calls
// on that state: a hook that changes them keeps state it cannot rely on, since a call may run on
// any state of the pool. A state is used by one goroutine at a time. The broker
// calls the hooks on the leader, before the command that carries their decision is proposed;
// a replay never runs them.
//
// Errors wrap sandbox.ErrScript (the script raised, returned a wrong type, or broke a limit) or
// sandbox.ErrTimeout (the budget of lua.timeout_ms ran out).
package hooks
