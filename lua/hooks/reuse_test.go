package hooks_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/lua/sandbox"
)

// The msg table and its headers are reused between calls on a state; whatever a call changes
// in them (a field added, removed or given a metatable) is not seen by the next call.
func TestChangesToMsgDoNotReachTheNextCall(t *testing.T) {
	r := newRuntime(t)
	for _, change := range []string{
		`msg.extra = 1`, `msg[1] = true`, `msg[true] = 1`, `setmetatable(msg, {__index = function() return "x" end})`,
		`msg.idempotency_key = "k"`, `msg.queue = nil`, `msg.headers = {tenant = "other"}`,
		`msg.headers.extra = "x"`, `msg.headers[1] = "x"`, `msg.headers.tenant = nil`, `msg.headers.tenant = "other"`,
		`setmetatable(msg.headers, {__index = function() return "x" end})`,
		`msg.extra = 1 msg.extra = nil`, `for i = 1, 100 do msg["k" .. i] = i msg["k" .. i] = nil end`,
	} {
		s := compile(t, r, hooks.OnEnqueue, `
function on_enqueue(msg)
  local h = msg.headers
  local ok = msg.extra == nil and msg[1] == nil and msg[true] == nil and msg.k1 == nil and getmetatable(msg) == nil
    and msg.idempotency_key == nil and msg.queue == "jobs" and h.tenant == "acme" and h.extra == nil and h[1] == nil
    and getmetatable(h) == nil
  `+change+`
  return { fairness_key = ok and "clean" or "dirty" }
end`)
		for i := range 4 {
			c, err := r.OnEnqueue(s, input)
			if err != nil || c.FairnessKey != "clean" {
				t.Fatalf("%s: call %d: %+v %v", change, i, c, err)
			}
		}
	}
}

// A call sees exactly its own message's headers, whatever the previous call's were.
func TestHeadersAreTheMessagesOwn(t *testing.T) {
	r := newRuntime(t)
	s := compile(t, r, hooks.OnEnqueue, `
function on_enqueue(msg)
  local keys = {}
  for k, v in pairs(msg.headers) do keys[#keys + 1] = k .. "=" .. v end
  table.sort(keys)
  return { fairness_key = "[" .. table.concat(keys, ",") .. "]" }
end`)
	for _, c := range []struct {
		headers map[string]string
		want    string
	}{
		{map[string]string{"a": "1"}, "[a=1]"}, {map[string]string{"a": "2"}, "[a=2]"},
		{map[string]string{"b": "1"}, "[b=1]"}, {map[string]string{"a": "1", "b": "2"}, "[a=1,b=2]"},
		{map[string]string{"b": "3", "a": "4"}, "[a=4,b=3]"}, {nil, "[]"}, {map[string]string{}, "[]"},
		{map[string]string{"a": "5"}, "[a=5]"},
	} {
		in := input
		in.Headers = c.headers
		got, err := r.OnEnqueue(s, in)
		if err != nil || got.FairnessKey != c.want {
			t.Fatalf("headers %v: %+v %v, want %s", c.headers, got, err, c.want)
		}
	}
}

// A batch of calls gives every message its own verdict: a failing call does not fail the next
// ones, and an infinite loop late in a batch still times out.
func TestBatchCallsAreIndependent(t *testing.T) {
	r := strictRuntime(t)
	s := compile(t, r, hooks.OnEnqueue, `
function on_enqueue(msg)
  if msg.headers.tenant == "bad" then error("bad tenant") end
  if msg.headers.tenant == "loop" then while true do end end
  return { fairness_key = msg.headers.tenant, attributes = { tenant = msg.headers.tenant } }
end`)
	b := r.Batch()
	defer b.Close()
	sets := &hooks.AttributeSets{}
	var shared map[string]string
	for i := range 300 {
		tenant := "acme"
		switch {
		case i%7 == 3:
			tenant = "bad"
		case i == 250:
			tenant = "loop"
		}
		in := input
		in.Headers, in.Attributes = map[string]string{"tenant": tenant}, sets
		c, err := b.OnEnqueue(s, in)
		switch tenant {
		case "bad":
			if !errors.Is(err, sandbox.ErrScript) {
				t.Fatalf("call %d: %v, want a script error", i, err)
			}
		case "loop":
			if !errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("call %d: %v, want a timeout", i, err)
			}
		default:
			if err != nil || c.FairnessKey != "acme" || !maps.Equal(c.Attributes, map[string]string{"tenant": "acme"}) {
				t.Fatalf("call %d: %+v %v", i, c, err)
			}
			if shared == nil {
				shared = c.Attributes
			}
			c.Attributes["probe"] = "x" // the same map every time: the probe shows in the shared one
			if len(shared) != 2 {
				t.Fatalf("call %d: the attributes are not shared", i)
			}
			delete(c.Attributes, "probe")
		}
	}
}

// Identical attribute sets share one map; different ones do not.
func TestAttributeSetsShareEqualSets(t *testing.T) {
	var sets hooks.AttributeSets
	a := sets.Intern(map[string]string{"x": "1", "y": "2"})
	b := sets.Intern(map[string]string{"y": "2", "x": "1"})
	c := sets.Intern(map[string]string{"x": "1", "y": "3"})
	a["probe"] = ""
	if len(b) != 3 || len(c) != 2 {
		t.Fatalf("shared %v %v", b, c)
	}
	if sets.Intern(nil) != nil {
		t.Fatal("nil interned to a map")
	}
}

func BenchmarkOnEnqueueTypicalBatch(b *testing.B) {
	r := hooks.NewRuntime(sandbox.DefaultLimits(), nil)
	s, err := r.Compile(hooks.OnEnqueue, typicalHook)
	if err != nil {
		b.Fatal(err)
	}
	in := hooks.EnqueueInput{Queue: "q", Headers: map[string]string{"group": "0"}, PayloadSize: 1024, FairnessKey: "default",
		Weight: 1, Attributes: &hooks.AttributeSets{}}
	b.ReportAllocs()
	batch := r.Batch()
	n := 0
	for b.Loop() {
		if _, err := batch.OnEnqueue(s, in); err != nil {
			b.Fatal(err)
		}
		if n++; n%100 == 0 { // a frame of 100 messages, as the broker classifies them
			batch.Close()
			batch = r.Batch()
		}
	}
	batch.Close()
}

// Queues with the same script share one compiled Script; another source or hook gets its own.
func TestTheSameSourceCompilesToOneScript(t *testing.T) {
	r := newRuntime(t)
	src := `function on_enqueue(msg) return { fairness_key = msg.queue } end`
	a, b := compile(t, r, hooks.OnEnqueue, src), compile(t, r, hooks.OnEnqueue, src)
	if a != b {
		t.Fatal("the same source compiled to two scripts")
	}
	if c := compile(t, r, hooks.OnEnqueue, src+" "); c == a {
		t.Fatal("another source shared the script")
	}
	for _, q := range []string{"q1", "q2", "q1"} { // one script, each call sees its own queue
		in := input
		in.Queue = q
		if c, err := r.OnEnqueue(b, in); err != nil || c.FairnessKey != q {
			t.Fatalf("%s: %+v %v", q, c, err)
		}
	}
	if _, err := r.Compile(hooks.OnFailure, src); err == nil {
		t.Fatal("an on_enqueue script compiled as on_failure")
	}
}
