package hooks

import (
	"math"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// EnqueueInput is what on_enqueue sees of a message (msg.queue, msg.headers, msg.payload_size,
// msg.fairness_key, msg.weight, msg.delay_ms, msg.idempotency_key). The fairness key and weight
// are the producer's after defaults ("default", 1).
type EnqueueInput struct {
	Queue             string
	Headers           map[string]string
	PayloadSize       int
	FairnessKey       string
	Weight            uint32
	DelayMs           uint64
	IdempotencyKey    string
	HasIdempotencyKey bool
	// Attributes, when set, shares the returned attribute maps (see AttributeSets).
	Attributes *AttributeSets
}

// Classification is the outcome of on_enqueue: the producer's values with every field the hook
// returned put over them.
type Classification struct {
	FairnessKey string
	Weight      uint32
	DelayMs     uint64
	// Attributes are the returned attributes; nil when the hook returned none.
	Attributes map[string]string
}

// maxFairnessKey is the longest fairness key (a u16-prefixed string in the protocols).
const maxFairnessKey = math.MaxUint16

// OnEnqueue runs s (an on_enqueue script) for one message.
func (r *Runtime) OnEnqueue(s *Script, in EnqueueInput) (Classification, error) {
	b := Batch{r: r}
	defer b.Close()
	return b.OnEnqueue(s, in)
}

// OnEnqueue runs s (an on_enqueue script) for one message of the batch.
func (b *Batch) OnEnqueue(s *Script, in EnqueueInput) (Classification, error) {
	c := Classification{FairnessKey: in.FairnessKey, Weight: in.Weight, DelayMs: in.DelayMs}
	err := b.call(s, func(st *state, m *lua.LTable) lua.LValue {
		v := &st.values
		m.RawSetString("queue", v.str(slotQueue, in.Queue))
		m.RawSetString("headers", st.headersTable(OnEnqueue, in.Headers))
		m.RawSetString("payload_size", v.num(slotPayloadSize, float64(in.PayloadSize)))
		m.RawSetString("fairness_key", v.str(slotFairnessKey, in.FairnessKey))
		m.RawSetString("weight", v.num(slotWeight, float64(in.Weight)))
		m.RawSetString("delay_ms", v.num(slotDelay, float64(in.DelayMs)))
		idem := lua.LValue(lua.LNil)
		if in.HasIdempotencyKey {
			idem = lua.LString(in.IdempotencyKey)
		}
		m.RawSetString("idempotency_key", idem)
		return m
	}, func(v lua.LValue) error { return readClassification(v, in.Attributes, &c) })
	return c, err
}

func readClassification(v lua.LValue, sets *AttributeSets, c *Classification) error {
	if v == lua.LNil {
		return nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		return scriptErrorf("on_enqueue returned a %s, want nil or a table", v.Type())
	}
	if f := t.RawGetString("fairness_key"); f != lua.LNil {
		s, ok := f.(lua.LString)
		if !ok || len(s) == 0 || len(s) > maxFairnessKey || !utf8.ValidString(string(s)) {
			return scriptErrorf("on_enqueue: fairness_key must be a non-empty UTF-8 string of at most %d bytes, got %s", maxFairnessKey, describe(f))
		}
		c.FairnessKey = string(s)
	}
	if f := t.RawGetString("weight"); f != lua.LNil {
		n, ok := integer(f, 1, math.MaxUint32)
		if !ok {
			return scriptErrorf("on_enqueue: weight must be an integer from 1 to %d, got %s", uint32(math.MaxUint32), describe(f))
		}
		c.Weight = uint32(n)
	}
	if f := t.RawGetString("delay_ms"); f != lua.LNil {
		n, ok := integer(f, 0, 1<<53)
		if !ok {
			return scriptErrorf("on_enqueue: delay_ms must be an integer ≥ 0, got %s", describe(f))
		}
		c.DelayMs = n
	}
	if f := t.RawGetString("attributes"); f != lua.LNil {
		a, err := readAttributes(f, sets)
		if err != nil {
			return err
		}
		c.Attributes = a
	}
	return nil
}

// readAttributes reads an attributes table: string keys to string values (shared through sets
// when it is set).
func readAttributes(v lua.LValue, sets *AttributeSets) (map[string]string, error) {
	t, ok := v.(*lua.LTable)
	if !ok {
		return nil, scriptErrorf("on_enqueue: attributes must be a table of strings, got %s", describe(v))
	}
	if sets == nil {
		return (&AttributeSets{}).fromTable(t, false)
	}
	return sets.fromTable(t, true)
}

// integer reads a Lua number that is a whole number within [lo, hi].
func integer(v lua.LValue, lo, hi uint64) (uint64, bool) {
	n, ok := v.(lua.LNumber)
	f := float64(n)
	if !ok || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, false
	}
	return uint64(f), true
}

// describe names a returned value for an error message.
func describe(v lua.LValue) string {
	switch v.Type() {
	case lua.LTString, lua.LTNumber, lua.LTBool:
		s := v.String()
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		if v.Type() == lua.LTString {
			return "the string " + `"` + s + `"`
		}
		return s
	}
	return "a " + v.Type().String()
}

// stringTable is a new Lua table holding m; what a script writes into it is discarded with it.
func stringTable(L *lua.LState, m map[string]string) *lua.LTable {
	t := L.CreateTable(0, len(m))
	for k, v := range m {
		t.RawSetString(k, lua.LString(v))
	}
	return t
}
