package broker

import (
	"sort"
	"strconv"
	"strings"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/service"
)

// The admin operations take domain types (admintypes.go) and return a nil *Error on success; a
// failure's Code is the result's error code and its Message is for the log.

// checkDefinition validates the settings of a CreateQueue.
func checkDefinition(req *QueueSpec) *Error {
	switch {
	case !validName(req.Name):
		return errorf(CodeInvalidConfigValue, "queue name %q must be 1 to 255 bytes of UTF-8 without spaces, *, control or bidi-override characters", req.Name)
	case strings.HasSuffix(req.Name, dlqSuffix):
		return errorf(CodeReservedQueueName, "queue names ending in %q are reserved for dead-letter queues", dlqSuffix)
	case !req.ScriptFailure.Known():
		return errorf(CodeInvalidConfigValue, "script_failure %d is not 0 (reject) or 1 (park)", req.ScriptFailure)
	case !req.Backoff.Known():
		return errorf(CodeInvalidConfigValue, "backoff %d is not one of 0..3", req.Backoff)
	case !req.DeliveryDurability.Known():
		return errorf(CodeInvalidConfigValue, "delivery_durability %d is not 0 (committed) or 1 (fast)", req.DeliveryDurability)
	case !req.WhenOrderingKeyMissing.Known():
		return errorf(CodeInvalidConfigValue, "when_ordering_key_missing %d is not 0 or 1", req.WhenOrderingKeyMissing)
	case req.VisibilityTimeoutMs > engine.MaxLeaseExtensionMs:
		return errorf(CodeInvalidConfigValue, "visibility_timeout_ms %d exceeds 12 hours", req.VisibilityTimeoutMs)
	case req.DedupWindowMs > MaxDedupWindowMs:
		return dedupWindowTooLong(req.DedupWindowMs)
	case req.Backoff == service.BackoffExponential && req.BackoffMaxMs != 0 && req.BackoffInitialMs > req.BackoffMaxMs:
		return errorf(CodeInvalidConfigValue, "backoff_max_ms %d is below backoff_initial_ms %d", req.BackoffMaxMs, req.BackoffInitialMs)
	}
	if e := checkShards(req); e != nil {
		return e
	}
	return checkKeys(req)
}

// CreateQueue creates a queue and its dead-letter queue (the queue's ID is its name).
func (b *Broker) CreateQueue(req QueueSpec) *Error {
	if e := checkDefinition(&req); e != nil {
		return e
	}
	if _, e := b.compileHooks(req.OnEnqueueScript, req.OnFailureScript, req.HasOnEnqueue, req.HasOnFailure); e != nil {
		return e
	}
	now := uint64(b.clock().UnixMilli())
	def := store.QueueRecord{
		Name: req.Name, CreatedAt: now, VisibilityTimeoutMs: req.VisibilityTimeoutMs,
		OnEnqueueScript: req.OnEnqueueScript, OnFailureScript: req.OnFailureScript,
		Ordering: store.Ordering(req.Ordering), OrderingKey: req.OrderingKey.AppendTo(nil),
		WhenOrderingKeyMissing: store.WhenOrderingKeyMissing(req.WhenOrderingKeyMissing),
		DedupKey:               req.DedupKey.AppendTo(nil),
		DedupWindowMs:          req.DedupWindowMs, ScriptFailure: store.ScriptFailure(req.ScriptFailure),
		ParkDeadLetterAfter: req.ParkDeadLetterAfter, MaxAttempts: req.MaxAttempts,
		Backoff: store.Backoff(req.Backoff), BackoffInitialMs: req.BackoffInitialMs, BackoffMaxMs: req.BackoffMaxMs,
		DeliveryDurability: store.DeliveryDurability(req.DeliveryDurability), ReclaimGraceMs: req.ReclaimGraceMs,
	}
	if req.Shards > 1 {
		def.Shards = req.Shards
	}
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return errorf(CodeInternalError, "the broker is shutting down")
	}
	// Applying the command decides whether the name is free, alike on every node; the registry
	// then opens the group wherever the meta group placed it, here included.
	b.adminMu.Lock() // proposals one at a time; what they may do is decided in apply alone
	applied, err := b.proposeMetaThen(meta.CreateQueue(&def, uint32(b.opts.Cluster.Replication), uint32(b.opts.MaxQueues)))
	b.adminMu.Unlock()
	if err == nil {
		err = applied()
	}
	if err != nil {
		return b.refusal(err)
	}
	for i := range max(req.Shards, 1) {
		if err := b.awaitGroup(shard.Name(req.Name, i)); err != nil { // defined, and opened on the next start
			return errorf(CodeStorageError, "%v", err)
		}
	}
	b.events.QueueCreated(req.Name)
	return nil
}

// DeleteQueue deletes a queue, its dead-letter queue and every message of both. Deleting a
// dead-letter queue alone deletes its messages; the queue keeps an empty one.
func (b *Broker) DeleteQueue(queue string) *Error {
	if r := b.lookup(queue); r.a != nil && r.lane == queuegroup.LaneDeadLetter {
		return b.purgeDeadLetters(r)
	}
	b.adminMu.Lock()
	applied, err := b.proposeMetaThen(meta.DeleteQueue(queue))
	b.adminMu.Unlock()
	if err == nil {
		err = applied()
	}
	if err != nil {
		return b.refusal(err)
	}
	if err := b.awaitGroup(queue); err != nil {
		return errorf(CodeStorageError, "%v", err)
	}
	b.events.QueueDeleted(queue)
	return nil
}

// purgeDeadLetters empties a dead-letter queue (as acks of every message in it).
func (b *Broker) purgeDeadLetters(r queueRef) *Error {
	e, ok := r.a.commitCall(func(a *actor) *Error {
		var ids []engine.MsgID
		for m := range a.st.Lane(r.lane).Messages() {
			ids = append(ids, m.ID)
		}
		now := a.now()
		for _, id := range ids {
			if err := a.st.Ack(r.lane, id, now); err == nil {
				a.bodies.remove(id)
			}
		}
		return nil
	})
	if !ok {
		e = errorf(CodeQueueNotFound, "queue %q was deleted", r.name())
	}
	return e
}

// UpdateQueue changes a queue's mutable settings; absent fields stay as they are.
func (b *Broker) UpdateQueue(req QueueUpdate) *Error {
	r := b.lookup(req.Queue)
	if r.a == nil {
		return errorf(CodeQueueNotFound, "queue %q does not exist", req.Queue)
	}
	if req.OnEnqueueChange > ScriptRemove || req.OnFailureChange > ScriptRemove {
		return errorf(CodeInvalidConfigValue, "script change must be 0 (unchanged), 1 (set) or 2 (remove)")
	}
	if (req.OnEnqueueChange == ScriptSet || req.OnFailureChange == ScriptSet) && r.lane == queuegroup.LaneDeadLetter {
		return errorf(CodeInvalidConfigValue, "a dead-letter queue has no Lua hooks")
	}
	if _, e := b.compileHooks(req.OnEnqueueScript, req.OnFailureScript,
		req.OnEnqueueChange == ScriptSet, req.OnFailureChange == ScriptSet); e != nil {
		return e
	}
	if v := req.Backoff; v != nil && !v.Known() {
		return errorf(CodeInvalidConfigValue, "backoff %d is not one of 0..3", *v)
	}
	if v := req.DeliveryDurability; v != nil && !v.Known() {
		return errorf(CodeInvalidConfigValue, "delivery_durability %d is not 0 or 1", *v)
	}
	if v := req.VisibilityTimeoutMs; v != nil && *v > engine.MaxLeaseExtensionMs {
		return errorf(CodeInvalidConfigValue, "visibility_timeout_ms %d exceeds 12 hours", *v)
	}
	if v := req.DedupWindowMs; v != nil && *v > MaxDedupWindowMs {
		return dedupWindowTooLong(*v)
	}
	b.adminMu.Lock() // an update reads the definition it changes: one at a time
	defer b.adminMu.Unlock()
	def, ok := b.catalog().Queue(req.Queue)
	if !ok {
		return errorf(CodeQueueNotFound, "queue %q was deleted", req.Queue)
	}
	if e := b.checkUpdate(&def, &req); e != nil {
		return e
	}
	if err := b.proposeMeta(meta.UpdateQueue(&def)); err != nil {
		return b.refusal(err)
	}
	group := req.Queue
	if def.DLQOf != "" {
		group = def.DLQOf
	}
	if err := b.awaitGroup(group); err != nil { // the group took the definition (actor.Update)
		return errorf(CodeStorageError, "%v", err)
	}
	if req.OnEnqueueChange == ScriptUnchanged {
		return nil
	}
	e, ok := r.a.commitCall(func(a *actor) *Error {
		a.reclassifyAll(a.now()) // parked messages get the new script's verdict
		return nil
	})
	if !ok {
		return errorf(CodeQueueNotFound, "queue %q was deleted", req.Queue)
	}
	return e
}

// checkUpdate applies an UpdateQueue's present fields to def and validates the result.
func (b *Broker) checkUpdate(def *store.QueueRecord, req *QueueUpdate) *Error {
	set(&def.VisibilityTimeoutMs, req.VisibilityTimeoutMs)
	set(&def.DedupWindowMs, req.DedupWindowMs)
	set(&def.BackoffInitialMs, req.BackoffInitialMs)
	set(&def.BackoffMaxMs, req.BackoffMaxMs)
	set(&def.ReclaimGraceMs, req.ReclaimGraceMs)
	set(&def.MaxAttempts, req.MaxAttempts)
	set(&def.ParkDeadLetterAfter, req.ParkDeadLetterAfter)
	if v := req.Backoff; v != nil {
		def.Backoff = store.Backoff(*v)
	}
	if v := req.DeliveryDurability; v != nil {
		def.DeliveryDurability = store.DeliveryDurability(*v)
	}
	switch req.OnEnqueueChange {
	case ScriptSet:
		def.OnEnqueueScript = req.OnEnqueueScript
	case ScriptRemove:
		def.OnEnqueueScript = ""
	}
	switch req.OnFailureChange {
	case ScriptSet:
		def.OnFailureScript = req.OnFailureScript
	case ScriptRemove:
		def.OnFailureScript = ""
	}
	cfg := b.engineConfig(def)
	if err := cfg.Validate(); err != nil {
		return errorf(CodeInvalidConfigValue, "%v", err)
	}
	return nil
}

// set stores *v in dst when v is not nil.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// GetStats answers from the queue's live state.
func (b *Broker) GetStats(queue string) (QueueStats, *Error) {
	r := b.lookup(queue)
	if r.a == nil {
		return QueueStats{}, errorf(CodeQueueNotFound, "queue %q does not exist", queue)
	}
	var s engine.Stats
	if r.a.asleep(func(sum *summary) { s = cloneStats(sum.Lanes[r.lane].Stats) }) {
		return queueStats(&s, b.queueThrottles(queue)), nil
	}
	if !r.a.read(func(a *actor) { q := a.st.Lane(r.lane); q.Advance(a.now()); s = q.Stats() }) {
		return QueueStats{}, errorf(CodeQueueNotFound, "queue %q was deleted", queue)
	}
	return queueStats(&s, b.queueThrottles(queue)), nil
}

// ListQueues lists every queue with its headline counters, by name.
func (b *Broker) ListQueues() []QueueSummary {
	var res []QueueSummary
	for _, name := range b.queueNames() {
		r := b.lookup(name)
		if r.a == nil {
			continue
		}
		var s engine.Stats
		if r.a.asleep(func(sum *summary) { s = sum.Lanes[r.lane].Stats }) ||
			r.a.read(func(a *actor) { s = a.st.Lane(r.lane).Counts() }) {
			res = append(res, QueueSummary{Name: name, Depth: s.Depth, InFlight: s.InFlight, ActiveConsumers: s.ActiveConsumers})
		}
	}
	return res
}

// Redrive moves up to count dead-lettered messages (0 = all), oldest first, from dead-letter queue
// dlq back to its parent, reclassifying them as reclassify (ReclassifyAll..ReclassifyNone) says,
// and reports what it did. Messages in flight in the dead-letter queue stay there.
func (b *Broker) Redrive(dlq string, count uint64, reclassify Reclassify) (RedriveResult, *Error) {
	fail := func(e *Error) (RedriveResult, *Error) { return RedriveResult{}, e }
	r := b.lookup(dlq)
	switch {
	case r.a == nil:
		return fail(errorf(CodeQueueNotFound, "queue %q does not exist", dlq))
	case r.lane != queuegroup.LaneDeadLetter:
		return fail(errorf(CodeNotADLQ, "queue %q is not a dead-letter queue", dlq))
	case reclassify > ReclassifyNone:
		return fail(errorf(CodeInvalidConfigValue, "reclassify %d is not one of 0..2", reclassify))
	}
	var res RedriveResult
	e, ok := r.a.commitCall(func(a *actor) *Error {
		var err error
		res, err = a.redrive(count, reclassify)
		if err != nil {
			return errorf(CodeInternalError, "%v", err)
		}
		return nil
	})
	if !ok {
		return fail(errorf(CodeQueueNotFound, "queue %q was deleted", dlq))
	}
	if e != nil {
		return fail(e)
	}
	return res, nil
}

// ListConfig lists runtime config entries whose key starts with prefix, with the current value
// of every key the broker understands.
func (b *Broker) ListConfig(prefix string) []ConfigEntry {
	b.mu.RLock()
	entries := map[string]string{}
	for k, v := range b.config {
		entries[k] = v
	}
	for _, k := range knownKeys() {
		entries[k] = knownConfig[k].get(&b.defaults)
	}
	b.mu.RUnlock()
	keys := make([]string, 0, len(entries))
	for k := range entries {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var res []ConfigEntry
	for _, k := range keys {
		res = append(res, ConfigEntry{Key: k, Value: entries[k]})
	}
	return res
}

// GetConfig reads one runtime config entry; an unset key answers InvalidConfigValue.
func (b *Broker) GetConfig(k string) (string, *Error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if key, ok := knownConfig[k]; ok {
		return key.get(&b.defaults), nil
	}
	if v, ok := b.config[k]; ok {
		return v, nil
	}
	return "", errorf(CodeInvalidConfigValue, "config key %q is not set", k)
}

// SetConfig stores a runtime config entry; keys the broker understands are validated and take
// effect at once.
func (b *Broker) SetConfig(k, value string) *Error {
	if k == "" {
		return errorf(CodeInvalidConfigValue, "config key must not be empty")
	}
	if e := unknownKeyError(k); e != nil {
		return e
	}
	if e := queueKeyError(k, value); e != nil {
		return e
	}
	key, known := knownConfig[k]
	if known {
		d := b.currentDefaults()
		if err := key.apply(&d, value); err != nil {
			return errorf(CodeInvalidConfigValue, "%s: %v", k, err)
		}
	}
	b.adminMu.Lock() // config writes commit in the order they are applied
	defer b.adminMu.Unlock()
	if err := b.proposeMeta(&queuelog.SetConfig{Key: k, Value: value}); err != nil {
		return b.refusal(err) // applied, on every node, by configSet
	}
	return nil
}

// configSet applies a runtime config entry the meta group set (on its apply goroutine, on every
// node): keys the broker understands take effect at once.
func (b *Broker) configSet(k, value string) {
	key, known := knownConfig[k]
	actors := b.actors()
	b.mu.Lock()
	b.config[k] = value
	if known {
		if err := key.apply(&b.defaults, value); err != nil { // validated by the proposer
			b.log.Warn("ignoring a config value", "key", k, "value", value, "err", err)
		}
		b.hooks.SetLimits(b.defaults.luaLimits())
	}
	var limited *actor
	if name, _, ok := parseQueueKey(k); ok {
		setQueueKey(b.limits, k, value)
		if r := b.lookup(name); r.a != nil {
			limited = r.a
		}
	}
	b.mu.Unlock()
	b.wakeForLimits(k, limited, actors)
	if known {
		for _, a := range actors {
			a.postAwake(func(a *actor) { // a sleeping group reads the defaults when it wakes
				for l := range a.lanes {
					a.syncConfig(queuegroup.Lane(l))
				}
			})
		}
	}
}

// Rebalancing state is kept in the runtime config store (cluster-wide state in a cluster), under
// these keys, so that it survives restarts.
const (
	rebalancingKey     = "cluster.rebalancing"
	rebalancingEndsKey = "cluster.rebalancing_pause_ends_at"
)

// rebalancing returns the current mode and pause end; a pause that has run out reads as enabled.
func (b *Broker) rebalancing() (RebalancingMode, uint64) {
	b.mu.RLock()
	mode, ends := b.config[rebalancingKey], b.config[rebalancingEndsKey]
	b.mu.RUnlock()
	switch mode {
	case "disabled":
		return RebalancingDisabled, 0
	case "paused":
		end, _ := strconv.ParseUint(ends, 10, 64)
		if uint64(b.clock().UnixMilli()) < end {
			return RebalancingPaused, end
		}
	}
	return RebalancingEnabled, 0
}

// SetRebalancing enables, pauses (for pauseMs) or disables rebalancing. On a single node there is
// nothing to move, but the state is kept and reported as a cluster would.
func (b *Broker) SetRebalancing(m RebalancingMode, pauseMs uint64) *Error {
	var mode, ends string
	switch m {
	case RebalancingEnabled:
		mode = "enabled"
	case RebalancingPaused:
		if pauseMs == 0 {
			return errorf(CodeInvalidConfigValue, "a pause needs pause_ms > 0")
		}
		mode, ends = "paused", strconv.FormatUint(uint64(b.clock().UnixMilli())+pauseMs, 10)
	case RebalancingDisabled:
		mode = "disabled"
	default:
		return errorf(CodeInvalidConfigValue, "rebalancing mode %d is not 0, 1 or 2", m)
	}
	// Two entries, ordered so that no moment in between reads as enabled: a pause's end before
	// its mode, a cleared end after the mode that needs none.
	order := [][2]string{{rebalancingKey, mode}, {rebalancingEndsKey, ends}}
	if m == RebalancingPaused {
		order[0], order[1] = order[1], order[0]
	}
	for _, kv := range order {
		if e := b.SetConfig(kv[0], kv[1]); e != nil {
			return e
		}
	}
	return nil
}

// GetClusterStatus describes the single node, which leads every queue.
func (b *Broker) GetClusterStatus() ClusterStatus {
	mode, ends := b.rebalancing()
	return ClusterStatus{Rebalancing: mode, PauseEndsAt: ends, QueueLeaderships: uint32(len(b.queueNames()))}
}

// Routes answers which queues this node leads: every one of queues (all queues when empty), or
// QueueNotFound for the first that does not exist.
func (b *Broker) Routes(queues []string) ([]string, *Error) {
	if len(queues) == 0 {
		var out []string
		for _, n := range b.queueNames() {
			if clientQueue(n) == n { // a shard's group is its queue's
				out = append(out, n)
			}
		}
		return out, nil
	}
	for _, n := range queues {
		if b.lookup(n).a == nil {
			return nil, errorf(CodeQueueNotFound, "queue %q does not exist", n)
		}
	}
	return queues, nil
}
