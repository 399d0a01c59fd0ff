package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/lua/sandbox"
)

// luaCommand groups the Lua tools; they run locally, without a broker.
func (a *app) luaCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "lua", Short: "Try queue hooks (Lua scripts) locally, in the broker's sandbox"})
	cmd.AddCommand(a.luaTestCommand())
	return cmd
}

// luaTest holds the flags of fila lua test: the message the hook sees.
type luaTest struct {
	hook           string
	headers        []string
	config         []string
	attributes     []string
	payloadSize    int
	fairnessKey    string
	weight         uint32
	delayMs        uint64
	idempotencyKey string
	errText        string
	attempts       uint32
	timeoutMs      uint64
	maxString      int
	maxCall        int
}

func (a *app) luaTestCommand() *cobra.Command {
	var t luaTest
	cmd := &cobra.Command{
		Use:   "test FILE",
		Short: "Run a hook script once on a sample message and print what it returns",
		Long: "Runs on_enqueue (or on_failure) of FILE in the same sandbox and with the same limits as the broker, " +
			"on a message built from the flags, and prints its answer; fila.get(k) reads the --config entry lua.env.k. " +
			"The hook is the one the script defines (on_enqueue first), or --hook. SIGINT or SIGTERM stops it.",
		Example: "  fila lua test tenant.lua --headers tenant=acme --config lua.env.tier.acme=gold\n" +
			"  fila lua test retry.lua --hook on_failure --error timeout --attempts 3",
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runLuaTest(cmd.Context(), args[0], &t) },
	}
	fs := cmd.Flags()
	fs.StringVar(&t.hook, "hook", "", "on_enqueue or on_failure (default: the one the script defines)")
	fs.StringArrayVar(&t.headers, "headers", nil, "message header k=v (repeatable)")
	fs.StringArrayVarP(&t.headers, "header", "H", nil, "same as --headers")
	fs.StringArrayVar(&t.config, "config", nil, "runtime config entry k=v (repeatable); fila.get(x) reads lua.env.x")
	fs.StringArrayVar(&t.attributes, "attribute", nil, "on_failure: message attribute k=v (repeatable)")
	fs.IntVar(&t.payloadSize, "payload-size", 0, "on_enqueue: msg.payload_size")
	fs.StringVar(&t.fairnessKey, "fairness-key", "default", "the producer's fairness key")
	fs.Uint32Var(&t.weight, "weight", 1, "on_enqueue: the producer's weight")
	fs.Uint64Var(&t.delayMs, "delay-ms", 0, "on_enqueue: the producer's delay_ms")
	fs.StringVar(&t.idempotencyKey, "idempotency-key", "", "on_enqueue: the producer's idempotency key (absent when empty)")
	fs.StringVar(&t.errText, "error", "boom", "on_failure: msg.error")
	fs.Uint32Var(&t.attempts, "attempts", 1, "on_failure: msg.attempts")
	def := sandbox.DefaultLimits()
	fs.Uint64Var(&t.timeoutMs, "budget-ms", uint64(def.Timeout/time.Millisecond), "the script's time budget (lua.timeout_ms)")
	fs.IntVar(&t.maxString, "max-string-bytes", def.MaxStringBytes, "longest string a library function or .. may make (lua.max_string_bytes)")
	fs.IntVar(&t.maxCall, "max-call-bytes", def.MaxCallBytes, "bytes the library functions and .. may allocate in one call (lua.max_call_bytes)")
	return cmd
}

// maxBudgetMs is the largest budget the broker's lua.timeout_ms takes.
const maxBudgetMs = 10_000

// runLuaTest runs the hook until it answers or ctx ends (SIGINT, SIGTERM): the hook runs on a
// goroutine of its own, left to its budget when ctx ends first (the process exits).
func (a *app) runLuaTest(ctx context.Context, file string, t *luaTest) error {
	type answer struct {
		print func() error
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		print, err := a.runLuaHook(file, t)
		done <- answer{print, err}
	}()
	select {
	case ans := <-done:
		if ans.err != nil {
			return ans.err
		}
		return ans.print()
	case <-ctx.Done():
		return errors.New("interrupted while the script ran")
	}
}

// runLuaHook runs the hook and returns the printing of its answer.
func (a *app) runLuaHook(file string, t *luaTest) (func() error, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	headers, err := parsePairs("--headers", t.headers)
	if err != nil {
		return nil, err
	}
	config, err := parsePairs("--config", t.config)
	if err != nil {
		return nil, err
	}
	attrs, err := parsePairs("--attribute", t.attributes)
	if err != nil {
		return nil, err
	}
	if t.timeoutMs == 0 || t.timeoutMs > maxBudgetMs {
		return nil, usagef("--budget-ms must be from 1 to %d, as lua.timeout_ms", maxBudgetMs)
	}
	if t.maxString < 1 || t.maxCall < 1 {
		return nil, usagef("--max-string-bytes and --max-call-bytes must be at least 1")
	}
	lim := sandbox.DefaultLimits()
	lim.Timeout = time.Duration(t.timeoutMs) * time.Millisecond
	lim.MaxStringBytes, lim.MaxCallBytes = t.maxString, t.maxCall
	rt := hooks.NewRuntime(lim, func(k string) (string, bool) { v, ok := config[k]; return v, ok })
	script, err := compileHook(rt, t.hook, string(src))
	if err != nil {
		return nil, err
	}
	if script.Hook() == hooks.OnEnqueue {
		in := hooks.EnqueueInput{Queue: "test", Headers: headers, PayloadSize: t.payloadSize, FairnessKey: t.fairnessKey,
			Weight: max(t.weight, 1), DelayMs: t.delayMs, IdempotencyKey: t.idempotencyKey, HasIdempotencyKey: t.idempotencyKey != ""}
		c, err := rt.OnEnqueue(script, in)
		if err != nil {
			return nil, err
		}
		return func() error { return a.printClassification(c) }, nil
	}
	in := hooks.FailureInput{ID: "00000000-0000-7000-8000-000000000000", Queue: "test", Headers: headers, Attempts: t.attempts,
		Error: t.errText, FairnessKey: t.fairnessKey, Attributes: attrs}
	d, decided, err := rt.OnFailure(script, in)
	if err != nil {
		return nil, err
	}
	return func() error { return a.printFailureDecision(d, decided) }, nil
}

// compileHook compiles src as the hook named (or, for "", as the first hook it defines).
func compileHook(rt *hooks.Runtime, name, src string) (*hooks.Script, error) {
	switch name {
	case "on_enqueue":
		return rt.Compile(hooks.OnEnqueue, src)
	case "on_failure":
		return rt.Compile(hooks.OnFailure, src)
	case "":
		s, err := rt.Compile(hooks.OnEnqueue, src)
		if err == nil {
			return s, nil
		}
		if s, ferr := rt.Compile(hooks.OnFailure, src); ferr == nil {
			return s, nil
		}
		return nil, err
	}
	return nil, usagef("--hook %q: want on_enqueue or on_failure", name)
}

func (a *app) printClassification(c hooks.Classification) error {
	if a.json {
		return a.printJSON(map[string]any{"hook": "on_enqueue", "fairness_key": c.FairnessKey, "weight": c.Weight,
			"delay_ms": c.DelayMs, "attributes": c.Attributes})
	}
	return a.printTable([]string{"FAIRNESS KEY", "WEIGHT", "DELAY MS", "ATTRIBUTES"},
		[][]string{{c.FairnessKey, strconv.FormatUint(uint64(c.Weight), 10), strconv.FormatUint(c.DelayMs, 10), formatPairs(c.Attributes)}})
}

func (a *app) printFailureDecision(d hooks.FailureDecision, decided bool) error {
	action := map[hooks.Action]string{hooks.Retry: "retry", hooks.DeadLetter: "dlq"}[d.Action]
	if a.json {
		out := map[string]any{"hook": "on_failure", "decided": decided}
		if decided {
			out["action"] = action
			if d.HasDelay {
				out["delay_ms"] = d.DelayMs
			}
		}
		return a.printJSON(out)
	}
	if !decided {
		_, err := fmt.Fprintln(a.stdout, "no decision: the queue's retry policy decides")
		return err
	}
	delay := "-"
	if d.Action == hooks.Retry {
		delay = "(retry policy)"
	}
	if d.HasDelay {
		delay = strconv.FormatUint(d.DelayMs, 10)
	}
	return a.printTable([]string{"ACTION", "DELAY MS"}, [][]string{{action, delay}})
}

// parsePairs reads k=v flag values.
func parsePairs(flag string, kvs []string) (map[string]string, error) {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want name=value", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

// formatPairs prints a map as k=v pairs in key order ("-" when empty).
func formatPairs(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, " ")
}
