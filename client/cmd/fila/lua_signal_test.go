package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestLuaTestStopsOnInterrupt: SIGINT or SIGTERM (the command's context ending) stops fila lua
// test while its script still runs — here a script that backtracks in string.find, which ran for
// hours inside one library call and ignored the signal. The guard only turns a hang into a
// failure; the run's own budget is 10 s, and stopping at it would not say "interrupted".
func TestLuaTestStopsOnInterrupt(t *testing.T) {
	src := luaFile(t, `function on_enqueue(m)
  while true do string.find(("a"):rep(300), "a*a*a*a*a*b") end
end`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(50*time.Millisecond, cancel) // before or after the script starts: the same answer
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- runWith(ctx, []string{"lua", "test", src, "--budget-ms", "10000"}, nil, &out, &errOut) }()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errOut.String(), "interrupted while the script ran") {
			t.Fatalf("exit %d, stderr %q; want 1 and interrupted", code, errOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("fila lua test did not stop within 60 s of its context ending")
	}
}

// TestLuaTestRunsUnderTheBrokersBudgets: the library functions are budgeted as on the broker,
// and the time budget is at most lua.timeout_ms's largest value.
func TestLuaTestRunsUnderTheBrokersBudgets(t *testing.T) {
	bomb := luaFile(t, `function on_enqueue(m) return { fairness_key = table.concat({ ("x"):rep(2^20), ("x"):rep(2^20) }) } end`)
	if _, errOut, code := runLua(t, bomb, "--budget-ms", "10000"); code != 1 || !strings.Contains(errOut, "table.concat") {
		t.Errorf("a 2 MiB table.concat: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := runLua(t, luaFile(t, "function on_enqueue(m) end"), "--budget-ms", "10001"); code != 2 {
		t.Errorf("--budget-ms 10001: exit %d, want 2", code)
	}
	// the broker's lua.max_string_bytes and lua.max_call_bytes, as an operator set them
	rep := luaFile(t, `function on_enqueue(m) return { fairness_key = ("x"):rep(3000) } end`)
	if _, errOut, code := runLua(t, rep, "--max-string-bytes", "2048"); code != 1 || !strings.Contains(errOut, "string.rep") {
		t.Errorf("--max-string-bytes 2048: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := runLua(t, rep, "--max-call-bytes", "2048"); code != 1 || !strings.Contains(errOut, "budget of 2048 bytes") {
		t.Errorf("--max-call-bytes 2048: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := runLua(t, rep); code != 0 {
		t.Errorf("the defaults: exit %d", code)
	}
}
