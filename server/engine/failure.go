package engine

// Reasons DecideFailure gives a dead-letter (Fail.Reason).
const (
	// ReasonMaxAttempts: the message failed as many times as the queue's MaxAttempts.
	ReasonMaxAttempts = "max_attempts"
	// ReasonScript: the queue's failure policy (its on_failure script) dead-lettered it.
	ReasonScript = "script"
)

// FailureDecision is a failure policy's answer for one failed delivery.
type FailureDecision struct {
	// DeadLetter sends the message to the dead-letter queue instead of retrying it.
	DeadLetter bool
	// HasDelay says DelayMs is set; without it a retry uses the queue's backoff.
	HasDelay bool
	// DelayMs is the retry delay when HasDelay is set.
	DelayMs uint64
}

// FailurePolicy decides what happens to a failed message before the Fail command is made; it is
// the hook for a queue's on_failure Lua script. It runs only where commands are made (the
// leader), never during Apply or replay, so it may be slow or nondeterministic.
type FailurePolicy interface {
	// OnFailure is called with the failed message (leased, with Attempts counting the failed
	// delivery; or held, see Queue.Hold, and reported as ready) and the error text. It returns ok = false to fall back to the queue's retry policy, as a
	// script that returns nothing, raises or times out does. m is only valid during the call.
	OnFailure(m *Message, errText string) (d FailureDecision, ok bool)
}

// FailurePolicyFunc adapts a function to FailurePolicy.
type FailurePolicyFunc func(m *Message, errText string) (FailureDecision, bool)

// OnFailure calls f.
func (f FailurePolicyFunc) OnFailure(m *Message, errText string) (FailureDecision, bool) {
	return f(m, errText)
}

var _ FailurePolicy = FailurePolicyFunc(nil)

// SetFailurePolicy installs p (nil removes it) for later DecideFailure calls. It is not a
// command: the broker installs the same policy wherever it makes commands.
func (q *Queue) SetFailurePolicy(p FailurePolicy) { q.policy = p }

// CheckLease reports whether id is leased and its lease has not ended at now, or is held (see
// Hold) and the hold has not ended at now; otherwise it returns ErrMessageNotFound. The broker
// checks a client's Ack, Nack and ExtendLease with it before making the command (a lease that
// ended answers MessageNotFound even before Expired is handled).
func (q *Queue) CheckLease(id MsgID, now int64) error {
	_, r, err := q.claimed(id)
	if err != nil {
		return err
	}
	end := q.holdUntil
	if r.state() == stLeased {
		end = q.leases[r.next].expiresAt
	}
	if end <= now {
		return ErrMessageNotFound
	}
	return nil
}

// DecideExtend makes the Extend command for an ExtendLease of id received at now: the new
// expiry is ExtendDeadline(now, extendByMs), that is now + extendByMs capped at 12 hours, and At
// is now. The broker sets Consumer to the subscription asking (it matters when id is held). It
// returns ErrMessageNotFound if CheckLease does.
func (q *Queue) DecideExtend(id MsgID, now int64, extendByMs uint64) (Extend, error) {
	if err := q.CheckLease(id, now); err != nil {
		return Extend{}, err
	}
	return Extend{ID: id, ExpiresAt: ExtendDeadline(now, extendByMs), At: now}, nil
}

// DecideFailure makes the Fail command for a failed delivery of the leased (or held, see Hold)
// message id at now:
// a Nack (errText from the client, retryAfterMs its optional retry_after_ms) or a lease expiry
// (errText "lease expired", retryAfterMs nil). It follows concepts.md, "Retry policy":
//
//  1. the FailurePolicy, if any, decides retry or dead-letter and may give a delay;
//  2. otherwise the message is dead-lettered when Attempts ≥ MaxAttempts, else retried;
//  3. a retry waits retryAfterMs if given, else the policy's delay, else Config.RetryDelay.
//
// Fail.Attempts is the message's Attempts: the lease counted the failed delivery; a held
// message's unrecorded delivery is not counted (as when its hold ends). It does not change the
// queue. It returns ErrMessageNotFound if id is neither leased nor held; whether the lease or
// hold has ended is the caller's concern (CheckLease for a Nack; Expired for expiries).
func (q *Queue) DecideFailure(id MsgID, now int64, errText string, retryAfterMs *uint64) (Fail, error) {
	slot, r, err := q.claimed(id)
	if err != nil {
		return Fail{}, err
	}
	f := Fail{ID: id, At: now, Error: errText, Attempts: r.attempts}
	var d FailureDecision
	decided := false
	if q.policy != nil {
		m := q.message(slot)
		d, decided = q.policy.OnFailure(&m, errText)
	}
	if decided {
		f.DeadLetter, f.Reason = d.DeadLetter, ReasonScript
	} else {
		f.DeadLetter, f.Reason = r.attempts >= q.cfg.MaxAttempts, ReasonMaxAttempts
	}
	if f.DeadLetter {
		return f, nil
	}
	f.Reason = ""
	var delay uint64
	switch {
	case retryAfterMs != nil:
		delay = *retryAfterMs
	case decided && d.HasDelay:
		delay = d.DelayMs
	default:
		delay = q.cfg.RetryDelay(r.attempts)
	}
	f.NotBefore = addMs(now, delay)
	return f, nil
}
