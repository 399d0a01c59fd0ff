package broker

import (
	"encoding/binary"
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

// classified is what on_enqueue made of a message being enqueued.
type classified struct {
	msg   *Message          // the message with the hook's fairness key, weight and delay
	attrs map[string]string // the attributes it returned
	// parked: the script failed on a parking queue; msg keeps the producer's values.
	parked bool
	// code is CodeScriptError or CodeScriptTimeout when the script failed on a rejecting queue.
	code Code
}

// classify runs on_enqueue for a message of lane l.
func (a *actor) classify(l queuegroup.Lane, m *Message, payloadSize int) classified {
	msg, attrs, code := a.runOnEnqueue(l, m, payloadSize)
	if code != CodeOk && a.parks() {
		return classified{msg: m, parked: true}
	}
	return classified{msg: msg, attrs: attrs, code: code}
}

// runOnEnqueue returns the message with the hook's fairness key, weight and delay put over the
// producer's, and the attributes it returned. Code is CodeScriptError or CodeScriptTimeout when
// the script failed.
func (a *actor) runOnEnqueue(l queuegroup.Lane, m *Message, payloadSize int) (*Message, map[string]string, Code) {
	s := a.hooks.onEnqueue
	if s == nil || l != queuegroup.LaneQueue {
		return m, nil, CodeOk
	}
	in := hooks.EnqueueInput{Queue: a.lanes[l].name, Headers: m.Headers, PayloadSize: payloadSize,
		FairnessKey: m.FairnessKey, Weight: max(m.Weight, 1), DelayMs: m.DelayMs,
		IdempotencyKey: m.IdempotencyKey, HasIdempotencyKey: m.HasKey}
	if in.FairnessKey == "" {
		in.FairnessKey = engine.DefaultFairnessKey
	}
	c, err := a.b.hooks.OnEnqueue(s, in)
	if err != nil {
		a.log.Debug("on_enqueue failed", "err", err)
		return m, nil, scriptCode(err)
	}
	out := *m
	out.FairnessKey, out.Weight, out.DelayMs = c.FairnessKey, c.Weight, c.DelayMs
	return &out, a.attrs.intern(c.Attributes), CodeOk
}

// attrInterner shares one map among the messages of a queue whose hook returned the same
// attributes: a backlog then holds a few maps, not one per message, for the garbage collector to
// walk. Attribute maps are never changed once stored, so sharing is safe.
type attrInterner struct {
	maps map[string]map[string]string // by canonical encoding
	key  []byte
	ks   []string
}

// maxInterned bounds the distinct attribute sets remembered; beyond it the table starts over.
const maxInterned = 1024

func (t *attrInterner) intern(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > 8 {
		return m
	}
	t.ks = t.ks[:0]
	for k := range m {
		t.ks = append(t.ks, k)
	}
	slices.Sort(t.ks)
	t.key = t.key[:0]
	for _, k := range t.ks {
		t.key = binary.AppendUvarint(t.key, uint64(len(k)))
		t.key = append(t.key, k...)
		t.key = binary.AppendUvarint(t.key, uint64(len(m[k])))
		t.key = append(t.key, m[k]...)
	}
	if shared, ok := t.maps[string(t.key)]; ok {
		return shared
	}
	if t.maps == nil || len(t.maps) >= maxInterned {
		t.maps = map[string]map[string]string{}
	}
	t.maps[string(t.key)] = m
	return m
}

// scriptCode is the item code of a failed on_enqueue.
func scriptCode(err error) Code {
	if errors.Is(err, sandbox.ErrTimeout) {
		return CodeScriptTimeout
	}
	return CodeScriptError
}

// onFailure is the queue lane's failure policy: on_failure decides, or (ok false: it returned
// nothing, raised or timed out) the retry policy does.
func (a *actor) onFailure(m *engine.Message, errText string) (engine.FailureDecision, bool) {
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
	return lim
}

// configValue reads the runtime config for fila.get: a known key's current value, or the stored
// entry.
func (b *Broker) configValue(k string) (string, bool) {
	v, e := b.GetConfig(k)
	return v, e == nil
}
