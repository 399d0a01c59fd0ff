package broker

import (
	"fmt"
	"strings"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
)

// QueueLimits bound what one queue holds: how many messages (MaxDepth, and Policy for a full
// queue), for how long (RetentionMs, from the acceptance of each message) and how far ahead a
// producer may delay one (MaxDelayMs). CreateQueue has no fields for them: they are runtime
// config, the defaults.* keys for every queue and queue.<name>.* keys for one (queueKeys). They
// apply to a queue, not to its dead-letter queue, which takes what its queue dead-letters.
type QueueLimits struct {
	// MaxDepth is the messages the queue may hold: ready, delayed, in flight and parked
	// (0: no limit).
	MaxDepth uint64
	// Policy is what a full queue does with a new message.
	Policy DepthPolicy
	// RetentionMs is how long a message may stay after it was accepted; an older one is
	// dead-lettered with the reason "expired" (0: for ever).
	RetentionMs uint64
	// MaxDelayMs is the longest delay_ms an Enqueue may ask for.
	MaxDelayMs uint64
}

// DepthPolicy is what a queue at MaxDepth does with a new message.
type DepthPolicy uint8

const (
	// DepthReject refuses the new message with ChannelFull (retry_after_ms in the Error frame
	// when the whole Enqueue is refused).
	DepthReject DepthPolicy = iota
	// DepthDeadLetterOldest takes the new message and dead-letters the oldest messages not in
	// flight until the queue is back at its limit.
	DepthDeadLetterOldest
)

var depthPolicyNames = [...]string{"reject", "dead_letter_oldest"}

func (p DepthPolicy) String() string {
	if int(p) < len(depthPolicyNames) {
		return depthPolicyNames[p]
	}
	return fmt.Sprintf("DepthPolicy(%d)", uint8(p))
}

const (
	// DefaultMaxDelayMs is the default of defaults.max_delay_ms: 7 days, longer than SQS's 15
	// minutes because a Fila delay is per-message scheduling ("retry this tomorrow", an hour's
	// grace), which costs a delayed message no more than a ready one, and the same bound as the
	// longest retry backoff and dedup window. It still refuses a unit mistake (a delay meant in
	// seconds sent in microseconds, or a timestamp sent as a delay) instead of parking it for
	// years.
	DefaultMaxDelayMs = 7 * day
	// MaxDelayMs is the largest max_delay_ms (365 days).
	MaxDelayMs = 365 * day
	// MaxRetentionMs is the largest retention_ms (365 days).
	MaxRetentionMs = 365 * day
	// maxLimitMovesPerRound bounds the messages a round dead-letters for retention or depth; a
	// longer backlog goes on in the next rounds (the wake-up is already due).
	maxLimitMovesPerRound = 4096
)

// DefaultQueueLimits are the limits of a queue no key sets: no depth limit (the store's disk
// reserve bounds a runaway backlog, and a limit a deployment did not choose would refuse its
// producers), messages kept until consumed, delays up to DefaultMaxDelayMs.
func DefaultQueueLimits() QueueLimits {
	return QueueLimits{Policy: DepthReject, MaxDelayMs: DefaultMaxDelayMs}
}

func policyKey(doc string, field func(d *Defaults) *DepthPolicy) configKey {
	return configKey{
		doc: doc,
		get: func(d *Defaults) string { return field(d).String() },
		apply: func(d *Defaults, v string) error {
			for i, n := range depthPolicyNames {
				if strings.TrimSpace(v) == n {
					*field(d) = DepthPolicy(i)
					return nil
				}
			}
			return fmt.Errorf("want %s", strings.Join(depthPolicyNames[:], " or "))
		},
	}
}

// queueKeyPrefix starts the per-queue limit keys: queue.<name>.<setting>, where setting is one of
// limitSettings and its value is validated as defaults.<setting>'s. An empty value removes the
// queue's own value (the queue follows the default again).
const queueKeyPrefix = "queue."

var limitSettings = []string{"max_depth", "depth_policy", "retention_ms", "max_delay_ms"}

// parseQueueKey splits queue.<name>.<setting>; ok is false for any other key.
func parseQueueKey(k string) (name, setting string, ok bool) {
	rest, found := strings.CutPrefix(k, queueKeyPrefix)
	dot := strings.LastIndexByte(rest, '.')
	if !found || dot <= 0 {
		return "", "", false
	}
	name, setting = rest[:dot], rest[dot+1:]
	for _, s := range limitSettings {
		if s == setting {
			return name, setting, true
		}
	}
	return "", "", false
}

// queueKeyError validates a queue.* key and its value; nil for a valid one or a key outside
// queue.*.
func queueKeyError(k, value string) *Error {
	if !strings.HasPrefix(k, queueKeyPrefix) {
		return nil
	}
	name, setting, ok := parseQueueKey(k)
	if !ok {
		return errorf(CodeInvalidConfigValue, "unknown config key %q: the keys under %s are %s<queue>.<setting>, setting one of %s",
			k, queueKeyPrefix, queueKeyPrefix, strings.Join(limitSettings, ", "))
	}
	if strings.HasSuffix(name, dlqSuffix) {
		return errorf(CodeInvalidConfigValue, "%s: a dead-letter queue has no limits (it keeps what its queue dead-letters)", k)
	}
	if value == "" {
		return nil
	}
	d := Defaults{}
	if err := knownConfig["defaults."+setting].apply(&d, value); err != nil {
		return errorf(CodeInvalidConfigValue, "%s: %v", k, err)
	}
	return nil
}

// limitOverride is one queue's queue.<name>.* values: set has the bit 1<<i of limitSettings[i].
type limitOverride struct {
	set    uint8
	values Defaults // only Limits is used
}

// setQueueKey records a validated queue.* key's value in overrides.
func setQueueKey(overrides map[string]limitOverride, k, value string) {
	name, setting, ok := parseQueueKey(k)
	if !ok || queueKeyError(k, value) != nil {
		return
	}
	bit := uint8(0)
	for i, s := range limitSettings {
		if s == setting {
			bit = 1 << i
		}
	}
	o := overrides[name]
	if value == "" {
		o.set &^= bit
	} else {
		_ = knownConfig["defaults."+setting].apply(&o.values, value) // validated above
		o.set |= bit
	}
	if o.set == 0 {
		delete(overrides, name)
		return
	}
	overrides[name] = o
}

// limitOverrides parses every queue.* key of a runtime config.
func limitOverrides(config map[string]string) map[string]limitOverride {
	o := map[string]limitOverride{}
	for k, v := range config {
		setQueueKey(o, k, v)
	}
	return o
}

// limitsFor returns the limits of queue name: its queue.<name>.* values over the defaults.
func (b *Broker) limitsFor(name string) QueueLimits {
	b.mu.RLock()
	defer b.mu.RUnlock()
	l := b.defaults.Limits
	o, ok := b.limits[name]
	if !ok {
		return l
	}
	v := &o.values.Limits
	if o.set&1 != 0 {
		l.MaxDepth = v.MaxDepth
	}
	if o.set&2 != 0 {
		l.Policy = v.Policy
	}
	if o.set&4 != 0 {
		l.RetentionMs = v.RetentionMs
	}
	if o.set&8 != 0 {
		l.MaxDelayMs = v.MaxDelayMs
	}
	return l
}

// laneLimits returns lane l's limits; the dead-letter lane has only the delay limit.
func (a *actor) laneLimits(l queuegroup.Lane) QueueLimits {
	lim := a.b.limitsFor(a.lanes[queuegroup.LaneQueue].name)
	if l != queuegroup.LaneQueue {
		lim = QueueLimits{MaxDelayMs: lim.MaxDelayMs}
	}
	return lim
}

// depthFull reports whether lane l is at its max_depth with the reject policy, counting pending
// messages taken since its last Enqueue command.
func (a *actor) depthFull(l queuegroup.Lane, lim *QueueLimits, pending int) bool {
	return lim.MaxDepth > 0 && lim.Policy == DepthReject && uint64(a.st.Lane(l).Len()+pending) >= lim.MaxDepth
}

// depthRefusal says why lane l refuses messages (depthFull): the Error of a whole refused
// Enqueue, with the back-off to suggest and the key that set the limit.
func (a *actor) depthRefusal(l queuegroup.Lane) *Error {
	return &Error{Code: CodeChannelFull, RetryAfterMs: a.b.opts.RetryAfterMs,
		Message: fmt.Sprintf("queue %q is full: it holds %d messages, its max_depth; consume or purge it, or raise the limit (%s)",
			a.lanes[l].name, a.st.Lane(l).Len(), a.limitKey("max_depth"))}
}

// limitKey names the key a limit of this queue comes from, for messages.
func (a *actor) limitKey(setting string) string {
	k := queueKeyPrefix + a.lanes[queuegroup.LaneQueue].name + "." + setting
	if _, err := a.b.GetConfig(k); err == nil {
		return k
	}
	return "defaults." + setting
}

// refuseLongDelays refuses (InvalidConfigValue) the messages whose producer asked for a delay
// longer than the queue allows.
func refuseLongDelays(items []enqueueItem, classes []classified, lim *QueueLimits) {
	for i, it := range items {
		if it.msg.DelayMs > lim.MaxDelayMs {
			classes[i].code = CodeInvalidConfigValue
		}
	}
}

// refuseWhenFull answers a message that lane l, full at its max_depth (reject), refuses: pending
// messages are taken since its last Enqueue command; *refusal is made at the first refusal and
// shared by the others of the Enqueue.
func (a *actor) refuseWhenFull(l queuegroup.Lane, lim *QueueLimits, pending int, refusal **Error) (EnqueueResult, bool) {
	if !a.depthFull(l, lim, pending) {
		return EnqueueResult{}, false
	}
	if *refusal == nil {
		*refusal = a.depthRefusal(l)
	}
	return EnqueueResult{Code: CodeChannelFull, Refusal: *refusal}, true
}

// dropOldest dead-letters the oldest messages of lane l not in flight until it holds no more
// than its max_depth (the dead_letter_oldest policy), after an Enqueue at now.
func (a *actor) dropOldest(l queuegroup.Lane, lim *QueueLimits, now int64) {
	q := a.st.Lane(l)
	if lim.MaxDepth == 0 || lim.Policy != DepthDeadLetterOldest || uint64(q.Len()) <= lim.MaxDepth {
		return
	}
	over := min(uint64(q.Len())-lim.MaxDepth, maxLimitMovesPerRound)
	a.idBuf = q.OldestUnleased(int(over), int(over)+maxLimitMovesPerRound, a.idBuf[:0]) // past as many leases at most
	reason := fmt.Sprintf("dropped: the queue was full (max_depth %d, depth_policy dead_letter_oldest)", lim.MaxDepth)
	for _, id := range a.idBuf {
		a.deadLetter(l, id, now, ReasonMaxDepth, reason)
	}
}

// retain dead-letters the messages of the queue lane accepted longer than its retention ago,
// oldest first, with the reason "expired".
func (a *actor) retain(now int64) {
	lim := a.laneLimits(queuegroup.LaneQueue)
	if lim.RetentionMs == 0 {
		return
	}
	q := a.st.Lane(queuegroup.LaneQueue)
	a.idBuf = q.AcceptedBy(now-int64(lim.RetentionMs), maxLimitMovesPerRound, a.idBuf[:0])
	if len(a.idBuf) == 0 {
		return
	}
	reason := fmt.Sprintf("expired: accepted more than retention_ms %d ago", lim.RetentionMs)
	for _, id := range a.idBuf {
		a.deadLetter(queuegroup.LaneQueue, id, now, ReasonExpired, reason)
	}
}

// retentionWakeup is when the oldest message of the queue lane outlives its retention.
func (a *actor) retentionWakeup() (int64, bool) {
	lim := a.laneLimits(queuegroup.LaneQueue)
	if lim.RetentionMs == 0 {
		return 0, false
	}
	at, ok := a.st.Lane(queuegroup.LaneQueue).OldestAcceptedAt()
	if !ok {
		return 0, false
	}
	return addMs(at, lim.RetentionMs), true
}

// deadLetter moves a stored message of lane l to the dead-letter lane whatever its state, for
// why (ReasonExpired, ReasonMaxDepth) with reason as its last error: a DeadLetter in the group's
// log, so that every replica and replay moves it too. A consumer holding its lease finds it gone
// (MessageNotFound).
func (a *actor) deadLetter(l queuegroup.Lane, id engine.MsgID, now int64, why, reason string) {
	m, ok := a.st.Lane(l).Get(id)
	if !ok {
		return
	}
	f := engine.Fail{ID: id, At: now, Error: reason, DeadLetter: true, Attempts: m.Attempts, Reason: why}
	if err := a.fail(l, f); err != nil {
		a.log.Error("dead-lettering for a queue limit failed", "id", id, "reason", reason, "err", err)
	}
}

// wakeForLimits runs a round on the actors whose timers a new value of key k may move, even
// asleep: the queue's own actor for a queue.<name>.* key (limited; nil when there is no such
// queue), every actor for defaults.retention_ms.
func (b *Broker) wakeForLimits(k string, limited *actor, actors map[string]*actor) {
	if limited != nil {
		limited.post(func(*actor) {})
	}
	if k == "defaults.retention_ms" {
		for _, a := range actors {
			a.post(func(*actor) {})
		}
	}
}
