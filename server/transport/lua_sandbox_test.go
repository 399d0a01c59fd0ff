package transport

import (
	"fmt"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// These tests drive the Lua sandbox's escapes through FIBP (docs/lua-hooks.md, "The sandbox"):
// each one used to wedge a queue, grow the server's memory or leak a value across tenants.

// backtrack is a pattern search that takes hours in a backtracking matcher without a budget.
const backtrack = `string.find(("a"):rep(300), "a*a*a*a*a*b")`

// A script whose top level backtracks is refused at CreateQueue (its top level runs at
// compilation, within the budget); one whose hook backtracks fails its message with
// ScriptTimeout, and the queue answers the next requests. Before, CreateQueue never answered and
// the queue's Enqueue wedged it for good (the client's one-minute read wait fails the test).
func TestBacktrackingScriptsEndWithTheirBudget(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	top := `local found = ` + backtrack + `
function on_enqueue(msg) return nil end`
	e := expectError(t, c.Call(1, &fibp.CreateQueue{Name: "top", OnEnqueueScript: wire.Some(top)}), fibp.CodeLuaCompilationError)
	if !strings.Contains(e.Message, "timed out") {
		t.Fatalf("CreateQueue with a backtracking top level: %q, want a timeout", e.Message)
	}
	// A script too long to compile in a bounded time is refused with the limit.
	long := "function on_enqueue(msg) end\n" + strings.Repeat("-", 64<<10)
	if e := expectError(t, c.Call(2, &fibp.CreateQueue{Name: "long", OnEnqueueScript: wire.Some(long)}), fibp.CodeLuaCompilationError); !strings.Contains(e.Message, "65536") {
		t.Fatalf("CreateQueue with a 64 KiB script: %q, want the limit", e.Message)
	}
	newQueue(t, c, &fibp.CreateQueue{Name: "q", OnEnqueueScript: wire.Some(`
function on_enqueue(msg)
  if msg.headers.match == "slow" then ` + backtrack + ` end
  return { fairness_key = "ok" }
end`)})
	r := c.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{
		{Queue: "q", Headers: map[string]string{"match": "slow"}, Payload: []byte("slow")},
		{Queue: "q", Payload: []byte("fine")},
	}}).(*fibp.EnqueueResult)
	if r.Results[0].ErrorCode != fibp.CodeScriptTimeout || r.Results[1].ErrorCode != fibp.CodeOk {
		t.Fatalf("Enqueue: %v, %v; want ScriptTimeout, Ok", r.Results[0].ErrorCode, r.Results[1].ErrorCode)
	}
	if s := stats(t, c, "q"); s.ErrorCode != fibp.CodeOk || s.Depth != 1 {
		t.Fatalf("GetStats after the timeout: %v, depth %d", s.ErrorCode, s.Depth)
	}
}

// A script's library calls and .. are bounded in memory: each bomb fails its message with
// ScriptError, stores nothing, and the server goes on. Before, each one allocated gigabytes in
// one call (or, for the attributes, stored 13 MB with a 1-byte message).
func TestScriptMemoryBombsFailTheirMessage(t *testing.T) {
	c := scriptClient(t)
	newQueue(t, c, &fibp.CreateQueue{Name: "q", OnEnqueueScript: wire.Some(`
local bombs = {
  concat = function(s) local t = {} for i = 1, 2000 do t[i] = s end return table.concat(t) end,
  format = function(s) local t = {} for i = 1, 1000 do t[i] = s end return string.format(("%s"):rep(1000), unpack(t)) end,
  gsub = function(s) return (s:gsub(".", s)) end,
  double = function(s) while true do s = s .. s end end,
  attributes = function(s)
    local a, v = {}, s:sub(1, 65535)
    for i = 1, 65535 do a["k" .. i] = v end
    return nil, a
  end,
}
function on_enqueue(msg)
  local bomb = bombs[msg.headers.bomb]
  if bomb == nil then return { fairness_key = "ok" } end
  local key, attributes = bomb(("x"):rep(2^20))
  return { fairness_key = "bomb", attributes = attributes }
end`)})
	bombs := []string{"concat", "format", "gsub", "double", "attributes"}
	var msgs []fibp.EnqueueMessage
	for _, b := range bombs {
		msgs = append(msgs, fibp.EnqueueMessage{Queue: "q", Headers: map[string]string{"bomb": b}, Payload: []byte("x")})
	}
	msgs = append(msgs, fibp.EnqueueMessage{Queue: "q", Payload: []byte("fine")})
	r := c.Call(1, &fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult)
	for i, b := range bombs {
		if r.Results[i].ErrorCode != fibp.CodeScriptError {
			t.Errorf("%s: %v, want ScriptError", b, r.Results[i].ErrorCode)
		}
	}
	if last := r.Results[len(bombs)]; last.ErrorCode != fibp.CodeOk {
		t.Fatalf("the message without a bomb: %v", last.ErrorCode)
	}
	if s := stats(t, c, "q"); s.Depth != 1 {
		t.Fatalf("depth %d, want only the good message stored", s.Depth)
	}
}

// Nothing a call leaves in the script's top level reaches the next call, of the same queue or of
// another queue created with the same text: tenant b's queue never sees tenant a's header, and a
// table kept at the top level does not grow. Before, both queues shared one loaded script.
func TestScriptCallsShareNothingAcrossMessagesAndQueues(t *testing.T) {
	c := scriptClient(t)
	const src = `
local last
local seen = {}
function on_enqueue(msg)
  seen[#seen + 1] = msg.headers.tenant
  local before = last
  last = msg.headers.tenant
  return { fairness_key = (before or "nothing") .. "/" .. #seen }
end`
	newQueue(t, c, &fibp.CreateQueue{Name: "a", OnEnqueueScript: wire.Some(src)})
	newQueue(t, c, &fibp.CreateQueue{Name: "b", OnEnqueueScript: wire.Some(src)})
	for i := range 5 {
		enqueue(t, c, fibp.EnqueueMessage{Queue: "a", Headers: map[string]string{"tenant": fmt.Sprint("a-secret-", i)}, Payload: []byte("a")})
	}
	enqueue(t, c, fibp.EnqueueMessage{Queue: "b", Headers: map[string]string{"tenant": "b"}, Payload: []byte("b")})
	for i, q := range []string{"a", "b"} {
		c.Subscribe(uint32(3+i), q, 10)
		n := map[string]int{"a": 5, "b": 1}[q]
		for _, d := range c.Deliveries(n) {
			if d.FairnessKey != "nothing/1" {
				t.Fatalf("queue %s: a delivery classified %q, want every call to start afresh (nothing/1)", q, d.FairnessKey)
			}
		}
	}
}

// fila.get reads only the keys under lua.env.: a queue admin's script cannot read another key
// of the runtime config (a secret an operator stored, a setting). Before, fila.get("secret")
// returned the secret, which the script could put in a fairness key its consumers receive.
func TestScriptsReadOnlyTheLuaEnvNamespace(t *testing.T) {
	c := scriptClient(t)
	setConfig(t, c, "secret.token", "s3cret")
	setConfig(t, c, "lua.env.region", "eu")
	newQueue(t, c, &fibp.CreateQueue{Name: "q", OnEnqueueScript: wire.Some(`
function on_enqueue(msg)
  return { fairness_key = tostring(fila.get("secret.token")) .. "/" .. tostring(fila.get("lua.timeout_ms")) ..
    "/" .. tostring(fila.get("region")) }
end`)})
	enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})
	c.Subscribe(2, "q", 1)
	if d := c.Deliveries(1)[0]; d.FairnessKey != "nil/nil/eu" {
		t.Fatalf("the script read %q, want nil/nil/eu", d.FairnessKey)
	}
}
