package transport

import (
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// These tests drive the queues' Lua hooks (concepts.md, "Lua hooks") through FIBP.

// tenantHook classifies by the tenant header, with the tier's weight from the runtime config; it
// ignores the fairness key the client claims.
const tenantHook = `
function on_enqueue(msg)
  local tenant = msg.headers.tenant or "anonymous"
  local tier = fila.get("tier." .. tenant) or "free"
  return { fairness_key = tenant, weight = tonumber(fila.get("weight." .. tier) or "1"),
           attributes = { tier = tier } }
end`

// scriptClient starts a server and returns a client connected to it, past its handshake, with
// scripts given 5 s (relaxBudget).
func scriptClient(t *testing.T) *rawClient {
	t.Helper()
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	relaxBudget(t, c)
	return c
}

// relaxBudget gives a script call 5 s, and the calls of a request or a reclassification pass
// 60 s: tests that are not about the time budgets must not fail because a loaded machine (or the
// race detector) made their scripts slow.
func relaxBudget(t *testing.T, c *rawClient) {
	setConfig(t, c, "lua.timeout_ms", "5000")
	setConfig(t, c, "lua.request_budget_ms", "60000")
	setConfig(t, c, "lua.reclassify_budget_ms", "60000")
}

func setConfig(t *testing.T, c *rawClient, k, v string) {
	t.Helper()
	if r := c.Call(103, &fibp.SetConfig{Key: k, Value: v}).(*fibp.SetConfigResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("SetConfig %s: %v", k, r.ErrorCode)
	}
}

// Tenant fairness by header with weighted tiers: the hook's fairness key and weight replace the
// client's claim (a security property: the client cannot pick another tenant's share).
func TestOnEnqueueClassifiesByHeaderWithWeightedTiers(t *testing.T) {
	c := scriptClient(t)
	setConfig(t, c, "lua.env.tier.acme", "gold")
	setConfig(t, c, "lua.env.weight.gold", "3")
	newQueue(t, c, &fibp.CreateQueue{Name: "jobs", OnEnqueueScript: wire.Some(tenantHook)})
	var msgs []fibp.EnqueueMessage
	for range 40 {
		for _, tenant := range []string{"acme", "initech"} {
			msgs = append(msgs, fibp.EnqueueMessage{Queue: "jobs", Headers: map[string]string{"tenant": tenant}, Payload: []byte(tenant),
				FairnessKey: wire.Some("initech"), Weight: wire.Some[uint32](100)}) // a claim the hook overrides
		}
	}
	enqueue(t, c, msgs...)
	c.Subscribe(3, "jobs", 40)
	got := map[string]int{}
	for _, d := range c.Deliveries(40) {
		got[d.FairnessKey]++
		if want := map[string]uint32{"acme": 3, "initech": 1}[d.FairnessKey]; d.Weight != want {
			t.Fatalf("delivery of %s has weight %d, want %d", d.FairnessKey, d.Weight, want)
		}
		if string(d.Payload) != d.FairnessKey {
			t.Fatalf("message of tenant %s delivered under fairness key %s", d.Payload, d.FairnessKey)
		}
	}
	if got["acme"] != 30 || got["initech"] != 10 {
		t.Fatalf("40 deliveries went %v, want acme:30 initech:10 (weights 3:1)", got)
	}
}

// A script that does not compile, or lacks its function, is refused with the compiler's message;
// one that compiles can be set, replaced and removed with UpdateQueue, for later enqueues.
func TestScriptsAreCompiledAtCreateAndUpdate(t *testing.T) {
	c := scriptClient(t)
	for src, want := range map[string]string{
		"function on_enqueue(msg)\n  return {\n": "line:3",
		"function enqueue(msg) end":              "does not define function on_enqueue",
	} {
		e := expectError(t, c.Call(1, &fibp.CreateQueue{Name: "q", OnEnqueueScript: wire.Some(src)}), fibp.CodeLuaCompilationError)
		if !strings.Contains(e.Message, want) {
			t.Errorf("%q: message %q, want it to contain %q", src, e.Message, want)
		}
	}
	expectError(t, c.Call(2, &fibp.CreateQueue{Name: "q", OnFailureScript: wire.Some("function on_enqueue(m) end")}), fibp.CodeLuaCompilationError)
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})

	e := expectError(t, c.Call(3, &fibp.UpdateQueue{Queue: "q", OnEnqueueChange: fibp.ScriptChangeSet, OnEnqueueScript: "function on_enqueue(m) return { end"}),
		fibp.CodeLuaCompilationError)
	if !strings.Contains(e.Message, "line:1") {
		t.Errorf("update message %q lacks the line", e.Message)
	}
	update := func(change fibp.ScriptChange, src string) {
		t.Helper()
		if r := c.Call(4, &fibp.UpdateQueue{Queue: "q", OnEnqueueChange: change, OnEnqueueScript: src}).(*fibp.UpdateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("UpdateQueue: %v", r.ErrorCode)
		}
	}
	key := func(fk string) {
		enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte(fk), FairnessKey: wire.Some(fk)})
	}
	key("before")
	update(fibp.ScriptChangeSet, `function on_enqueue(m) return { fairness_key = "first" } end`)
	key("a")
	update(fibp.ScriptChangeSet, `function on_enqueue(m) return { fairness_key = "second" } end`)
	key("b")
	update(fibp.ScriptChangeRemove, "")
	key("after")
	c.Subscribe(5, "q", 4)
	var keys []string
	for _, d := range c.Deliveries(4) {
		keys = append(keys, d.FairnessKey)
	}
	if strings.Join(keys, " ") != "before first second after" {
		t.Fatalf("fairness keys %v, want before first second after", keys)
	}
}

// On a rejecting queue a failing script fails the item (ScriptError, or ScriptTimeout for the
// budget) and stores nothing; every escape from the sandbox fails that way and the server goes on.
func TestFailingScriptsRejectTheItem(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q", OnEnqueueScript: wire.Some(`
function on_enqueue(msg)
  local what = msg.headers.do_
  if what == "loop" then while true do end end
  if what == "memory" then local t = {} local i = 0 while true do i = i + 1 t[i] = { i } end end
  if what == "rep" then return { fairness_key = string.rep("x", 1e9) } end
  if what == "io" then io.open("/etc/passwd") end
  if what == "os" then os.exit(1) end
  if what == "require" then require("os") end
  if what == "load" then load("return 1")() end
  if what == "loadstring" then loadstring("return 1")() end
  if what == "dofile" then dofile("/etc/passwd") end
  if what == "debug" then debug.traceback() end
  if what == "setfenv" then setfenv(1, {}) end
  if what == "getfenv" then getfenv(1) end
  if what == "gc" then collectgarbage() end
  if what == "coroutine" then coroutine.wrap(function() end)() end
  if what == "string" then string.upper = nil end
  if what == "raise" then error("no") end
  if what == "type" then return "x" end
  if what == "weight" then return { weight = 0 } end
  return { fairness_key = "ok" }
end`)})
	cases := map[string]fibp.ErrorCode{"loop": fibp.CodeScriptTimeout, "memory": fibp.CodeScriptTimeout}
	for _, w := range []string{"rep", "io", "os", "require", "load", "loadstring", "dofile", "debug", "setfenv", "getfenv", "gc",
		"coroutine", "string", "raise", "type", "weight"} {
		cases[w] = fibp.CodeScriptError
	}
	var msgs []fibp.EnqueueMessage
	var order []string
	for w := range cases {
		order = append(order, w)
		msgs = append(msgs, fibp.EnqueueMessage{Queue: "q", Headers: map[string]string{"do_": w}, Payload: []byte(w)})
	}
	msgs = append(msgs, fibp.EnqueueMessage{Queue: "q", Payload: []byte("fine")})
	r := c.Call(1, &fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult)
	for i, w := range order {
		if r.Results[i].ErrorCode != cases[w] {
			t.Errorf("%s: %v, want %v", w, r.Results[i].ErrorCode, cases[w])
		}
	}
	if last := r.Results[len(order)]; last.ErrorCode != fibp.CodeOk {
		t.Fatalf("the message without a failure: %v", last.ErrorCode)
	}
	if s := stats(t, c, "q"); s.Depth != 1 {
		t.Fatalf("depth %d, want only the good message stored", s.Depth)
	}
	c.Subscribe(2, "q", 1)
	if d := c.Deliveries(1)[0]; d.FairnessKey != "ok" || string(d.Payload) != "fine" {
		t.Fatalf("delivery %+v", d)
	}
}

// The time budget is runtime config: raising lua.timeout_ms lets a slow script finish, without a
// restart.
func TestLuaTimeoutIsRuntimeConfig(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q", OnEnqueueScript: wire.Some(`
function on_enqueue(msg)
  local n = 0
  for i = 1, tonumber(msg.headers.n) do n = n + i end
  return { fairness_key = "k" }
end`)})
	slow := fibp.EnqueueMessage{Queue: "q", Headers: map[string]string{"n": "1000000000"}, Payload: []byte("x")}
	setConfig(t, c, "lua.timeout_ms", "1")
	if r := c.Call(1, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{slow}}).(*fibp.EnqueueResult); r.Results[0].ErrorCode != fibp.CodeScriptTimeout {
		t.Fatalf("with 1 ms: %v", r.Results[0].ErrorCode)
	}
	setConfig(t, c, "lua.timeout_ms", "10000")
	slow.Headers = map[string]string{"n": "100000"}
	if r := c.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{slow}}).(*fibp.EnqueueResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("with 10 s: %v", r.Results[0].ErrorCode)
	}
}

// on_failure decides retry (with its delay, unless the Nack gives retry_after_ms) or the DLQ, on
// a Nack and on lease expiry; a hook that returns nothing or fails leaves it to the retry policy.
func TestOnFailureDecidesRetryOrDeadLetter(t *testing.T) {
	c := scriptClient(t)
	newQueue(t, c, &fibp.CreateQueue{Name: "q", MaxAttempts: 1, Backoff: fibp.BackoffNone, VisibilityTimeoutMs: 200,
		OnFailureScript: wire.Some(`
function on_failure(msg)
  if msg.error == "transient" then return { action = "retry", delay_ms = 3600000 } end
  if msg.error == "again" then return { action = "retry" } end
  if msg.error == "lease expired" then return { action = "dlq" } end
  if msg.error == "broken" then error("hook bug") end
end`)})
	nack := func(id wire.UUID, text string, retryAfter wire.Optional[uint64]) {
		t.Helper()
		r := c.Call(9, &fibp.Nack{Items: []fibp.NackItem{{Queue: "q", MessageID: id, Error: text, RetryAfterMs: retryAfter}}}).(*fibp.NackResult)
		if r.Results[0].ErrorCode != fibp.CodeOk {
			t.Fatalf("nack: %v", r.Results[0].ErrorCode)
		}
	}
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})[0]
	c.Subscribe(2, "q", 0)
	c.Deliveries(1)
	nack(id, "again", wire.Optional[uint64]{}) // max_attempts 1 would dead-letter it: the hook retries
	if d := c.Deliveries(1)[0]; d.MessageID != id || d.AttemptCount != 2 {
		t.Fatalf("retry: %+v", d)
	}
	nack(id, "transient", wire.Optional[uint64]{}) // retried after the hook's hour
	if s := stats(t, c, "q"); s.Delayed != 1 || s.Depth != 1 {
		t.Fatalf("after a retry with the hook's delay: %+v", s)
	}

	other := enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("y")})[0]
	c.Deliveries(1)
	nack(other, "transient", wire.Some[uint64](0)) // retry_after_ms beats the hook's delay
	c.Deliveries(1)
	nack(other, "broken", wire.Optional[uint64]{}) // the hook fails: max_attempts 1 dead-letters it
	waitFor(t, func() bool { return stats(t, c, "q.dlq").Depth == 1 })

	expiring := enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("z")})[0]
	if d := c.Deliveries(1)[0]; d.MessageID != expiring {
		t.Fatalf("delivery %+v", d)
	}
	waitFor(t, func() bool { return stats(t, c, "q.dlq").Depth == 2 }) // lease expiry: the hook's DLQ
}
