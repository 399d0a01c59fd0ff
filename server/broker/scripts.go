package broker

import (
	"errors"
	"slices"
	"time"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/lua/sandbox"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
)

// A queue's Lua hooks run on its actor (the leader), before the command that carries what they
// decided is proposed: on_enqueue's fairness key, weight, delay and attributes are fields of the
// Enqueue command, on_failure's retry or dead-letter and delay are the Fail command's. Replay and
// replicas never run them.

// queueHooks are the compiled scripts of a queue (the queue lane; a dead-letter queue has none).
type queueHooks struct {
	onEnqueue, onFailure *hooks.Script
}

// compileHooks compiles the scripts that are given (hasEnqueue, hasFailure); a failure answers
// LuaCompilationError with the compiler's message.
func (b *Broker) compileHooks(onEnqueue, onFailure string, hasEnqueue, hasFailure bool) (queueHooks, *Error) {
	var h queueHooks
	for _, s := range []struct {
		hook  hooks.Hook
		src   string
		given bool
		dst   **hooks.Script
	}{{hooks.OnEnqueue, onEnqueue, hasEnqueue, &h.onEnqueue}, {hooks.OnFailure, onFailure, hasFailure, &h.onFailure}} {
		if !s.given {
			continue
		}
		c, err := b.hooks.Compile(s.hook, s.src)
		if err != nil {
			return queueHooks{}, errorf(CodeLuaCompilationError, "%v", err)
		}
		*s.dst = c
	}
	return h, nil
}

// loadHooks compiles the queue's scripts (unless they are the ones already loaded) and installs
// on_failure as the queue lane's failure policy.
func (a *actor) loadHooks() {
	def := &a.lanes[queuegroup.LaneQueue].def
	if a.hooks.source() != [2]string{def.OnEnqueueScript, def.OnFailureScript} {
		h, e := a.b.compileHooks(def.OnEnqueueScript, def.OnFailureScript, def.OnEnqueueScript != "", def.OnFailureScript != "")
		if e != nil {
			// Definitions are compiled before they are stored, so only a sandbox that became
			// stricter can refuse one: run the queue without its hooks and say so.
			a.log.Error("a stored Lua hook does not compile; the queue runs without its hooks", "err", e.Message)
		}
		a.hooks = h
	}
	q := a.st.Lane(queuegroup.LaneQueue)
	if a.hooks.onFailure == nil {
		q.SetFailurePolicy(nil)
		return
	}
	q.SetFailurePolicy(engine.FailurePolicyFunc(a.onFailure))
}

func (h queueHooks) source() [2]string {
	var s [2]string
	if h.onEnqueue != nil {
		s[0] = h.onEnqueue.Source()
	}
	if h.onFailure != nil {
		s[1] = h.onFailure.Source()
	}
	return s
}

// classified is what on_enqueue made of a message being enqueued: the producer's fairness key,
// weight and delay with the hook's put over them, and the attributes it returned.
type classified struct {
	fairnessKey string
	weight      uint32
	delayMs     uint64
	attrs       map[string]string
	// parked: the script failed on a parking queue; the producer's values are kept.
	parked bool
	// code is CodeScriptError or CodeScriptTimeout when the script failed on a rejecting queue.
	code Code
}

// classifyAll runs on_enqueue for the messages of lane l, into a buffer the actor reuses (valid
// until the next call). The calls share one pooled interpreter state and one reading of the
// thread's CPU clock (hooks.Batch); nothing blocks between them.
func (a *actor) classifyAll(l queuegroup.Lane, items []enqueueItem) []classified {
	out := slices.Grow(a.classBuf[:0], len(items))[:len(items)]
	a.classBuf = out
	s := a.hooks.onEnqueue
	if s == nil || l != queuegroup.LaneQueue {
		for i, it := range items {
			out[i] = classified{fairnessKey: it.msg.FairnessKey, weight: it.msg.Weight, delayMs: it.msg.DelayMs}
		}
		return out
	}
	budget := a.enqueueBudget()
	batch := a.b.hooks.Batch()
	defer batch.Close()
	for i, it := range items {
		if !budget.left() {
			out[i] = a.overBudget(it.msg)
			continue
		}
		start := time.Now()
		out[i] = a.classify(batch, s, it.msg, len(it.body.payload))
		budget.add(time.Since(start))
	}
	return out
}

// enqueueBudget returns the round's on_enqueue budget (lua.request_budget_ms), begun at the
// first Enqueue of the round that runs a script; the round ends it.
func (a *actor) enqueueBudget() *scriptBudget {
	if !a.enqBudget.on {
		a.enqBudget.begin(time.Duration(a.b.currentDefaults().LuaRequestBudgetMs) * time.Millisecond)
	}
	return &a.enqBudget
}

// failureBudget returns the round's on_failure budget (lua.request_budget_ms, beside the one of
// on_enqueue), shared by the Nacks and lease expiries of the round; the round ends it.
func (a *actor) failureBudget() *scriptBudget {
	if !a.failBudget.on {
		a.failBudget.begin(time.Duration(a.b.currentDefaults().LuaRequestBudgetMs) * time.Millisecond)
	}
	return &a.failBudget
}

// overBudget is the classification of a message whose on_enqueue the round's budget left no
// time for: refused ChannelFull (the producer retries it later), or parked unclassified on a
// parking queue (a reclassification pass runs the script later).
func (a *actor) overBudget(m *Message) classified {
	a.lanes[queuegroup.LaneQueue].m.overBudget.Inc()
	c := classified{fairnessKey: m.FairnessKey, weight: m.Weight, delayMs: m.DelayMs}
	if a.parks() {
		c.parked = true
		return c
	}
	c.code = CodeChannelFull
	return c
}

// classify runs on_enqueue s for a message of the queue lane.
func (a *actor) classify(batch *hooks.Batch, s *hooks.Script, m *Message, payloadSize int) classified {
	producers := classified{fairnessKey: m.FairnessKey, weight: m.Weight, delayMs: m.DelayMs}
	in := hooks.EnqueueInput{Queue: a.lanes[queuegroup.LaneQueue].name, Headers: m.Headers, PayloadSize: payloadSize,
		FairnessKey: m.FairnessKey, Weight: max(m.Weight, 1), DelayMs: m.DelayMs,
		IdempotencyKey: m.IdempotencyKey, HasIdempotencyKey: m.HasKey, Attributes: &a.attrs}
	if in.FairnessKey == "" {
		in.FairnessKey = engine.DefaultFairnessKey
	}
	c, err := batch.OnEnqueue(s, in)
	if err != nil {
		a.log.Debug("on_enqueue failed", "err", err)
		if a.parks() {
			producers.parked = true
			return producers
		}
		producers.code = scriptCode(err)
		return producers
	}
	return classified{fairnessKey: c.FairnessKey, weight: c.Weight, delayMs: c.DelayMs, attrs: c.Attributes}
}

// scriptCode is the item code of a failed on_enqueue.
func scriptCode(err error) Code {
	if errors.Is(err, sandbox.ErrTimeout) {
		return CodeScriptTimeout
	}
	return CodeScriptError
}

// onFailure is the queue lane's failure policy: on_failure decides, or (ok false: it returned
// nothing, raised, timed out, or the round's on_failure budget was spent) the retry policy does.
func (a *actor) onFailure(m *engine.Message, errText string) (engine.FailureDecision, bool) {
	budget := a.failureBudget()
	if !budget.left() { // the round's budget is spent: as when the hook times out
		a.lanes[queuegroup.LaneQueue].m.overBudget.Inc()
		return engine.FailureDecision{}, false
	}
	start := time.Now()
	defer func() { budget.add(time.Since(start)) }()
	in := hooks.FailureInput{ID: m.ID.String(), Queue: a.lanes[queuegroup.LaneQueue].name, Attempts: m.Attempts,
		Error: errText, FairnessKey: m.FairnessKey, Attributes: m.Attributes}
	if b, err := a.loadBody(m.ID); err == nil {
		in.Headers = b.headers
	}
	d, decided, err := a.b.hooks.OnFailure(a.hooks.onFailure, in)
	if err != nil {
		a.log.Debug("on_failure failed; the retry policy decides", "err", err)
		return engine.FailureDecision{}, false
	}
	if !decided {
		return engine.FailureDecision{}, false
	}
	return engine.FailureDecision{DeadLetter: d.Action == hooks.DeadLetter, HasDelay: d.HasDelay, DelayMs: d.DelayMs}, true
}

// luaLimits are the sandbox limits the runtime config gives.
func (d *Defaults) luaLimits() sandbox.Limits {
	lim := sandbox.DefaultLimits()
	lim.Timeout = time.Duration(d.LuaTimeoutMs) * time.Millisecond
	lim.CallStackSize = int(d.LuaCallStackSize)
	lim.RegistryMaxSize = int(d.LuaRegistryMaxSize)
	lim.MaxStringBytes = int(d.LuaMaxStringBytes)
	lim.MaxCallBytes = int(d.LuaMaxCallBytes)
	return lim
}

// configValue reads the runtime config for fila.get (which asks only for keys under
// hooks.EnvPrefix, lua.env.): the stored entry.
func (b *Broker) configValue(k string) (string, bool) {
	v, e := b.GetConfig(k)
	return v, e == nil
}
