package hooks

import (
	lua "github.com/yuin/gopher-lua"
)

// FailureInput is what on_failure sees of a failed delivery (msg.id, msg.queue, msg.headers,
// msg.attempts, msg.error, msg.fairness_key, msg.attributes).
type FailureInput struct {
	ID          string
	Queue       string
	Headers     map[string]string
	Attempts    uint32
	Error       string
	FairnessKey string
	Attributes  map[string]string
}

// Action is what on_failure decided.
type Action uint8

const (
	// Retry delivers the message again (after DelayMs when HasDelay).
	Retry Action = iota + 1
	// DeadLetter moves it to the dead-letter queue.
	DeadLetter
)

// FailureDecision is on_failure's answer.
type FailureDecision struct {
	Action   Action
	DelayMs  uint64
	HasDelay bool
}

// OnFailure runs s (an on_failure script) for one failed delivery. decided is false when the
// hook returned nothing: the retry policy decides then (as it does on an error).
func (r *Runtime) OnFailure(s *Script, in FailureInput) (d FailureDecision, decided bool, err error) {
	err = r.call(s, func(st *state, m *lua.LTable) lua.LValue {
		m.RawSetString("id", lua.LString(in.ID))
		m.RawSetString("queue", lua.LString(in.Queue))
		m.RawSetString("headers", st.headersTable(OnFailure, in.Headers))
		m.RawSetString("attempts", lua.LNumber(in.Attempts))
		m.RawSetString("error", lua.LString(in.Error))
		m.RawSetString("fairness_key", lua.LString(in.FairnessKey))
		m.RawSetString("attributes", stringTable(st.L, in.Attributes))
		return m
	}, func(v lua.LValue) error {
		var e error
		d, decided, e = readFailureDecision(v)
		return e
	})
	if err != nil {
		return FailureDecision{}, false, err
	}
	return d, decided, nil
}

func readFailureDecision(v lua.LValue) (FailureDecision, bool, error) {
	if v == lua.LNil {
		return FailureDecision{}, false, nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		return FailureDecision{}, false, scriptErrorf("on_failure returned a %s, want nil or a table", v.Type())
	}
	var d FailureDecision
	switch a := t.RawGetString("action"); a {
	case lua.LString("retry"):
		d.Action = Retry
	case lua.LString("dlq"):
		d.Action = DeadLetter
	default:
		return FailureDecision{}, false, scriptErrorf(`on_failure: action must be "retry" or "dlq", got %s`, describe(a))
	}
	if f := t.RawGetString("delay_ms"); f != lua.LNil {
		n, ok := integer(f, 0, 1<<53)
		if !ok {
			return FailureDecision{}, false, scriptErrorf("on_failure: delay_ms must be an integer ≥ 0, got %s", describe(f))
		}
		d.DelayMs, d.HasDelay = n, true
	}
	return d, true, nil
}
