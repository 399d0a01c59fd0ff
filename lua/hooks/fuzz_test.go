package hooks_test

import (
	"errors"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/lua/sandbox"
)

// FuzzHookResult runs hooks whose body and returned value are arbitrary Lua (a script a queue's
// administrator sets), on a message with arbitrary headers. Nothing may panic; an error must wrap
// sandbox.ErrScript or sandbox.ErrTimeout (or be a *hooks.CompileError at compile time); what the
// broker gets back must be within the protocol's bounds: a non-empty UTF-8 fairness key of at
// most 65535 bytes, a weight of at least 1, a delay of at most 2^53 ms, attributes of UTF-8
// strings, and for on_failure a known action.
func FuzzHookResult(f *testing.F) {
	for _, seed := range []struct {
		failure     bool
		body, value string
	}{
		{false, "", "nil"}, {false, "", `{fairness_key = msg.headers.t, weight = 3, delay_ms = 10}`},
		{false, "", `{fairness_key = "", weight = 0}`}, {false, "", `{weight = 1.5}`}, {false, "", `{weight = 0/0}`},
		{false, "", `{delay_ms = 2^53 + 1}`}, {false, "", `{delay_ms = -1}`}, {false, "", `{fairness_key = "\255"}`},
		{false, "", `{attributes = {a = "b", [1] = "c"}}`}, {false, "", `{attributes = {x = {}}}`},
		{false, "local t = {} for i = 1, 70000 do t[tostring(i)] = 'v' end", `{attributes = t}`},
		{false, "while true do end", "nil"}, {false, "error('boom')", "nil"}, {false, "", "42"},
		{false, "", `{fairness_key = string.rep("k", 70000)}`}, {false, "", `setmetatable({}, {__index = function() error("x") end})`},
		{true, "", `{action = "retry", delay_ms = 5}`}, {true, "", `{action = "dlq"}`}, {true, "", `{action = "maybe"}`},
		{true, "", `{action = "retry", delay_ms = 1e300}`}, {true, "", `"dlq"`},
	} {
		f.Add(seed.failure, seed.body, seed.value, "t", "acme")
	}
	lim := sandbox.DefaultLimits()
	lim.Timeout = 200 * time.Millisecond
	r := hooks.NewRuntime(lim, func(string) (string, bool) { return "", false })
	f.Fuzz(func(t *testing.T, failure bool, body, value, hk, hv string) {
		hook, fn := hooks.OnEnqueue, "on_enqueue"
		if failure {
			hook, fn = hooks.OnFailure, "on_failure"
		}
		src := "function " + fn + "(msg)\n" + body + "\nreturn " + value + "\nend"
		s, err := r.Compile(hook, src)
		if err != nil {
			var ce *hooks.CompileError
			if !errors.As(err, &ce) && !scriptError(err) {
				t.Fatalf("Compile failed with %v (%T), neither a CompileError nor a script error", err, err)
			}
			return
		}
		headers := map[string]string{hk: hv}
		if failure {
			d, decided, err := r.OnFailure(s, hooks.FailureInput{ID: "id", Queue: "q", Headers: headers, Attempts: 1, Error: "e", FairnessKey: "k"})
			switch {
			case err != nil:
				if !scriptError(err) {
					t.Fatalf("on_failure failed with %v, not a script error", err)
				}
			case decided && d.Action != hooks.Retry && d.Action != hooks.DeadLetter:
				t.Fatalf("on_failure decided action %d", d.Action)
			case decided && d.HasDelay && d.DelayMs > 1<<53:
				t.Fatalf("on_failure decided a delay of %d ms", d.DelayMs)
			}
			return
		}
		c, err := r.OnEnqueue(s, hooks.EnqueueInput{Queue: "q", Headers: headers, PayloadSize: 1, FairnessKey: "default", Weight: 1})
		if err != nil {
			if !scriptError(err) {
				t.Fatalf("on_enqueue failed with %v, not a script error", err)
			}
			return
		}
		if c.FairnessKey == "" || len(c.FairnessKey) > math.MaxUint16 || !utf8.ValidString(c.FairnessKey) {
			t.Fatalf("on_enqueue gave fairness key %q", c.FairnessKey)
		}
		if c.Weight == 0 || c.DelayMs > 1<<53 {
			t.Fatalf("on_enqueue gave weight %d, delay %d ms", c.Weight, c.DelayMs)
		}
		if len(c.Attributes) > math.MaxUint16 {
			t.Fatalf("on_enqueue gave %d attributes", len(c.Attributes))
		}
		for k, v := range c.Attributes {
			if !utf8.ValidString(k) || !utf8.ValidString(v) || len(k) > math.MaxUint16 || len(v) > math.MaxUint16 {
				t.Fatalf("on_enqueue gave attribute %q = %q", k, v)
			}
		}
	})
}

func scriptError(err error) bool {
	return errors.Is(err, sandbox.ErrScript) || errors.Is(err, sandbox.ErrTimeout)
}
