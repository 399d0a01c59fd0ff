package hooks_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/lua/sandbox"
)

// TestNothingSurvivesACall runs scripts that try to keep state from one call to the next — in
// a local of the top level (an upvalue of the hook), in a global, in a table the top level made
// — and checks that every call sees a fresh one.
func TestNothingSurvivesACall(t *testing.T) {
	for name, src := range map[string]string{
		"top-level local": `local n = 0
function on_enqueue(msg) n = n + 1 return { fairness_key = tostring(n) } end`,
		"top-level table": `local seen = {}
function on_enqueue(msg) seen[#seen + 1] = ("x"):rep(2^20) return { fairness_key = tostring(#seen) } end`,
		"global set by the hook": `function on_enqueue(msg) count = (count or 0) + 1 return { fairness_key = tostring(count) } end`,
		"global table": `t = {}
function on_enqueue(msg) table.insert(t, 1) return { fairness_key = tostring(#t) } end`,
		"nested closure": `local function counter() local n = 0 return function() n = n + 1 return n end end
local next = counter()
function on_enqueue(msg) return { fairness_key = tostring(next()) } end`,
		"redefined hook": `function on_enqueue(msg)
  function on_enqueue(msg) return { fairness_key = "2" } end
  return { fairness_key = "1" }
end`,
	} {
		t.Run(name, func(t *testing.T) {
			r := newRuntime(t)
			s := compile(t, r, hooks.OnEnqueue, src)
			b := r.Batch()
			defer b.Close()
			for i := range 20 {
				var c hooks.Classification
				var err error
				if i%2 == 0 { // a batch keeps one state; single calls take one from the pool
					c, err = b.OnEnqueue(s, input)
				} else {
					c, err = r.OnEnqueue(s, input)
				}
				if err != nil || c.FairnessKey != "1" {
					t.Fatalf("call %d: got %q, %v, want the first call's \"1\"", i+1, c.FairnessKey, err)
				}
			}
		})
	}
}

// TestQueuesWithTheSameScriptShareNothing: two queues compiled from one text share a Script;
// what one queue's message leaves in the script's top-level local never reaches the other's.
func TestQueuesWithTheSameScriptShareNothing(t *testing.T) {
	const src = `local last
function on_enqueue(msg)
  local before = last
  last = msg.headers.tenant
  return { fairness_key = before or "nothing" }
end`
	r := newRuntime(t)
	a, b := compile(t, r, hooks.OnEnqueue, src), compile(t, r, hooks.OnEnqueue, src)
	secret := hooks.EnqueueInput{Queue: "a", Headers: map[string]string{"tenant": "tenant-a-secret"}, FairnessKey: "default", Weight: 1}
	if _, err := r.OnEnqueue(a, secret); err != nil {
		t.Fatal(err)
	}
	c, err := r.OnEnqueue(b, hooks.EnqueueInput{Queue: "b", Headers: map[string]string{"tenant": "b"}, FairnessKey: "default", Weight: 1})
	if err != nil || c.FairnessKey != "nothing" {
		t.Fatalf("queue b got %q, %v; want \"nothing\"", c.FairnessKey, err)
	}
}

// TestAttributesAreBounded checks MaxAttributes and MaxAttributeBytes.
func TestAttributesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		src, msg string // msg: the error's, or "" for none
	}{
		{fmt.Sprintf(`local a = {} for i = 1, %d do a["k" .. i] = "v" end return { attributes = a }`, hooks.MaxAttributes), ""},
		{fmt.Sprintf(`local a = {} for i = 1, %d do a["k" .. i] = "v" end return { attributes = a }`, hooks.MaxAttributes+1), "more than 64 attributes"},
		{`local a, v = {}, ("v"):rep(65535) for i = 1, 65535 do a["k" .. i] = v end return { attributes = a }`, "more than 65536 bytes"},
		{`return { attributes = { k = ("v"):rep(65535 - 1) } }`, ""},
		{`return { attributes = { a = ("v"):rep(40000), b = ("v"):rep(40000) } }`, "more than 65536 bytes"},
	} {
		r := newRuntime(t)
		s := compile(t, r, hooks.OnEnqueue, "function on_enqueue(msg) "+tc.src+" end")
		_, err := r.OnEnqueue(s, input)
		switch {
		case tc.msg == "" && err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case tc.msg != "" && (!errors.Is(err, sandbox.ErrScript) || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%s: got %v, want a script error containing %q", tc.src, err, tc.msg)
		}
	}
}

// TestFilaGetReadsOnlyTheScriptNamespace: fila.get(k) reads lua.env.k, and no other key.
func TestFilaGetReadsOnlyTheScriptNamespace(t *testing.T) {
	config := map[string]string{"lua.env.region": "eu", "auth.secret": "s3cret", "lua.timeout_ms": "10"}
	r := hooks.NewRuntime(sandbox.DefaultLimits(), func(k string) (string, bool) { v, ok := config[k]; return v, ok })
	for key, want := range map[string]string{"region": "eu", "auth.secret": "nil", "lua.timeout_ms": "nil", "lua.env.region": "nil", "": "nil"} {
		s := compile(t, r, hooks.OnEnqueue, fmt.Sprintf(`function on_enqueue(msg) return { fairness_key = tostring(fila.get(%q)) } end`, key))
		c, err := r.OnEnqueue(s, input)
		if err != nil || c.FairnessKey != want {
			t.Errorf("fila.get(%q): got %q, %v, want %q", key, c.FairnessKey, err, want)
		}
	}
}
