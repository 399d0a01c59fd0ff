package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func luaFile(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.lua")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runLua(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"lua", "test"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// fila lua test runs a hook locally, in the broker's sandbox, and prints what it returned.
func TestLuaTestRunsAHookLocally(t *testing.T) {
	tenant := luaFile(t, `function on_enqueue(msg)
  local tier = fila.get("tier." .. msg.headers.tenant) or "free"
  return { fairness_key = msg.headers.tenant, weight = tier == "gold" and 3 or 1, attributes = { tier = tier } }
end`)
	out, errOut, code := runLua(t, tenant, "--headers", "tenant=acme", "--config", "lua.env.tier.acme=gold", "--json")
	var got map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got["fairness_key"] != "acme" || got["weight"] != float64(3) || got["attributes"].(map[string]any)["tier"] != "gold" {
		t.Fatalf("answer %v", got)
	}
	if out, _, code := runLua(t, tenant, "-H", "tenant=initech"); code != 0 || !strings.Contains(out, "initech") || !strings.Contains(out, "tier=free") {
		t.Fatalf("table output (exit %d): %q", code, out)
	}

	failure := luaFile(t, `function on_failure(msg)
  if msg.attempts >= 3 then return { action = "dlq" } end
  if msg.error == "later" then return { action = "retry", delay_ms = 500 } end
end`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--attempts", "3"}, "dlq"},
		{[]string{"--error", "later"}, "500"},
		{nil, "no decision"},
	} {
		out, errOut, code := runLua(t, append([]string{failure}, tc.args...)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// A script that fails prints one line saying why and exits 1; a bad command line exits 2.
func TestLuaTestReportsScriptFailures(t *testing.T) {
	for src, want := range map[string]string{
		"function on_enqueue(m)\n  return {":                       "line:2",
		"function other(m) end":                                    "does not define function on_enqueue",
		"function on_enqueue(m) while true do end end":             "timed out",
		"function on_enqueue(m) return { weight = 0 } end":         "weight must be an integer",
		"function on_enqueue(m) return os.getenv('HOME') end":      "script error",
		"function on_enqueue(m) return io.open('/etc/passwd') end": "script error",
	} {
		_, errOut, code := runLua(t, luaFile(t, src))
		if code != 1 || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q, want one line with %q", src, code, errOut, want)
		}
	}
	if _, _, code := runLua(t, luaFile(t, "function on_enqueue(m) end"), "--headers", "novalue"); code != 2 {
		t.Errorf("a header without a value: exit %d, want 2", code)
	}
	if _, _, code := runLua(t, luaFile(t, "function on_enqueue(m) end"), "--hook", "on_ack"); code != 2 {
		t.Errorf("an unknown hook: exit %d, want 2", code)
	}
}
