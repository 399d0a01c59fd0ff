package broker

import (
	"sort"
	"strconv"
	"strings"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
)

// The admin operations answer with their FIBP result frames. A failure travels in the result's
// error_code; the *Error returned beside it (nil on success) carries the human-readable message,
// which the transport logs.

// checkDefinition validates the settings of a CreateQueue.
func checkDefinition(req *fibp.CreateQueue) *Error {
	switch {
	case !validName(req.Name):
		return errorf(fibp.CodeInvalidConfigValue, "queue name %q must be 1 to 255 bytes without spaces or control characters", req.Name)
	case strings.HasSuffix(req.Name, dlqSuffix):
		return errorf(fibp.CodeReservedQueueName, "queue names ending in %q are reserved for dead-letter queues", dlqSuffix)
	case req.OnEnqueueScript.Present || req.OnFailureScript.Present:
		return errorf(fibp.CodeLuaCompilationError, "Lua hooks are not supported by this server yet")
	case req.Ordering != fibp.OrderingNone || len(req.OrderingKey) > 0:
		return errorf(fibp.CodeInvalidConfigValue, "ordering groups are not supported by this server yet")
	case len(req.DedupKey) > 0:
		return errorf(fibp.CodeInvalidConfigValue, "deduplication keys are not supported by this server yet")
	case req.ScriptFailure > fibp.ScriptFailurePark:
		return errorf(fibp.CodeInvalidConfigValue, "script_failure %d is not 0 (reject) or 1 (park)", req.ScriptFailure)
	case req.Backoff > fibp.BackoffExponential:
		return errorf(fibp.CodeInvalidConfigValue, "backoff %d is not one of 0..3", req.Backoff)
	case req.DeliveryDurability > fibp.DeliveryDurabilityFast:
		return errorf(fibp.CodeInvalidConfigValue, "delivery_durability %d is not 0 (committed) or 1 (fast)", req.DeliveryDurability)
	case req.WhenOrderingKeyMissing > fibp.WhenOrderingKeyMissingUnordered:
		return errorf(fibp.CodeInvalidConfigValue, "when_ordering_key_missing %d is not 0 or 1", req.WhenOrderingKeyMissing)
	case req.VisibilityTimeoutMs > engine.MaxLeaseExtensionMs:
		return errorf(fibp.CodeInvalidConfigValue, "visibility_timeout_ms %d exceeds 12 hours", req.VisibilityTimeoutMs)
	case req.Backoff == fibp.BackoffExponential && req.BackoffMaxMs != 0 && req.BackoffInitialMs > req.BackoffMaxMs:
		return errorf(fibp.CodeInvalidConfigValue, "backoff_max_ms %d is below backoff_initial_ms %d", req.BackoffMaxMs, req.BackoffInitialMs)
	}
	return nil
}

// CreateQueue creates a queue and its dead-letter queue.
func (b *Broker) CreateQueue(req *fibp.CreateQueue) (*fibp.CreateQueueResult, *Error) {
	fail := func(e *Error) (*fibp.CreateQueueResult, *Error) {
		return &fibp.CreateQueueResult{ErrorCode: e.Code}, e
	}
	if e := checkDefinition(req); e != nil {
		return fail(e)
	}
	now := uint64(b.clock().UnixMilli())
	def := store.QueueRecord{
		Name: req.Name, CreatedAt: now, VisibilityTimeoutMs: req.VisibilityTimeoutMs,
		Ordering: uint8(req.Ordering), WhenOrderingKeyMissing: uint8(req.WhenOrderingKeyMissing),
		DedupWindowMs: req.DedupWindowMs, ScriptFailure: uint8(req.ScriptFailure),
		ParkDeadLetterAfter: req.ParkDeadLetterAfter, MaxAttempts: req.MaxAttempts,
		Backoff: uint8(req.Backoff), BackoffInitialMs: req.BackoffInitialMs, BackoffMaxMs: req.BackoffMaxMs,
		DeliveryDurability: uint8(req.DeliveryDurability), ReclaimGraceMs: req.ReclaimGraceMs,
	}
	dlq := store.QueueRecord{Name: req.Name + dlqSuffix, CreatedAt: now, DLQOf: req.Name}

	// adminMu serializes queue creation and deletion; b.mu is held only to read and publish the
	// registry, never across a commit, so requests on other queues never wait for it.
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	b.mu.RLock()
	_, exists := b.queues[req.Name]
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return fail(errorf(fibp.CodeInternalError, "the broker is shutting down"))
	}
	if exists {
		return fail(errorf(fibp.CodeQueueAlreadyExists, "queue %q already exists", req.Name))
	}
	if err := b.proposeMeta(putQueue(&def), putQueue(&dlq)); err != nil {
		return fail(errorf(fibp.CodeStorageError, "%v", err))
	}
	a := newActor(b, def, dlq)
	if err := a.open(); err != nil { // defined, and opened on the next start
		return fail(errorf(fibp.CodeStorageError, "starting the queue: %v", err))
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = a.g.Shutdown()
		return fail(errorf(fibp.CodeInternalError, "the broker is shutting down"))
	}
	b.mu.Unlock()
	b.register(a)
	go a.run()
	b.events.QueueCreated(req.Name)
	return &fibp.CreateQueueResult{ErrorCode: fibp.CodeOk, QueueID: req.Name}, nil
}

// DeleteQueue deletes a queue, its dead-letter queue and every message of both. Deleting a
// dead-letter queue alone deletes its messages; the queue keeps an empty one.
func (b *Broker) DeleteQueue(req *fibp.DeleteQueue) (*fibp.DeleteQueueResult, *Error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	r := b.lookup(req.Queue)
	if r.a == nil {
		e := errorf(fibp.CodeQueueNotFound, "queue %q does not exist", req.Queue)
		return &fibp.DeleteQueueResult{ErrorCode: e.Code}, e
	}
	if r.lane == queuegroup.LaneDeadLetter {
		return b.purgeDeadLetters(r)
	}
	a := r.a
	if err := b.proposeMeta(&queuelog.DropQueue{Name: a.lanes[0].name}, &queuelog.DropQueue{Name: a.lanes[1].name}); err != nil {
		e := errorf(fibp.CodeStorageError, "%v", err)
		return &fibp.DeleteQueueResult{ErrorCode: e.Code}, e
	}
	b.mu.Lock()
	for _, l := range a.lanes {
		delete(b.queues, l.name)
	}
	b.mu.Unlock()
	a.call(func(a *actor) { a.deleted = true })
	<-a.done
	if err := b.dropData(a.name); err != nil { // dropped on the next start otherwise
		b.log.Error("removing a deleted queue's data failed", "queue", a.name, "err", err)
	}
	b.events.QueueDeleted(req.Queue)
	return &fibp.DeleteQueueResult{ErrorCode: fibp.CodeOk}, nil
}

// purgeDeadLetters empties a dead-letter queue (as acks of every message in it).
func (b *Broker) purgeDeadLetters(r queueRef) (*fibp.DeleteQueueResult, *Error) {
	e, ok := r.a.commitCall(func(a *actor) *Error {
		var ids []engine.MsgID
		for m := range a.st.Lane(r.lane).Messages() {
			ids = append(ids, m.ID)
		}
		for _, id := range ids {
			if err := a.st.Ack(r.lane, id); err == nil {
				a.bodies.remove(id)
			}
		}
		return nil
	})
	if !ok {
		e = errorf(fibp.CodeQueueNotFound, "queue %q was deleted", r.name())
	}
	if e != nil {
		return &fibp.DeleteQueueResult{ErrorCode: e.Code}, e
	}
	return &fibp.DeleteQueueResult{ErrorCode: fibp.CodeOk}, nil
}

// UpdateQueue changes a queue's mutable settings; absent fields stay as they are.
func (b *Broker) UpdateQueue(req *fibp.UpdateQueue) (*fibp.UpdateQueueResult, *Error) {
	fail := func(e *Error) (*fibp.UpdateQueueResult, *Error) {
		return &fibp.UpdateQueueResult{ErrorCode: e.Code}, e
	}
	r := b.lookup(req.Queue)
	if r.a == nil {
		return fail(errorf(fibp.CodeQueueNotFound, "queue %q does not exist", req.Queue))
	}
	if req.OnEnqueueChange == fibp.ScriptChangeSet || req.OnFailureChange == fibp.ScriptChangeSet {
		return fail(errorf(fibp.CodeLuaCompilationError, "Lua hooks are not supported by this server yet"))
	}
	if req.OnEnqueueChange > fibp.ScriptChangeRemove || req.OnFailureChange > fibp.ScriptChangeRemove {
		return fail(errorf(fibp.CodeInvalidConfigValue, "script change must be 0 (unchanged), 1 (set) or 2 (remove)"))
	}
	if v, ok := req.Backoff.Get(); ok && v > fibp.BackoffExponential {
		return fail(errorf(fibp.CodeInvalidConfigValue, "backoff %d is not one of 0..3", v))
	}
	if v, ok := req.DeliveryDurability.Get(); ok && v > fibp.DeliveryDurabilityFast {
		return fail(errorf(fibp.CodeInvalidConfigValue, "delivery_durability %d is not 0 or 1", v))
	}
	if v, ok := req.VisibilityTimeoutMs.Get(); ok && v > engine.MaxLeaseExtensionMs {
		return fail(errorf(fibp.CodeInvalidConfigValue, "visibility_timeout_ms %d exceeds 12 hours", v))
	}
	b.adminMu.Lock() // definitions commit in the order they are applied
	defer b.adminMu.Unlock()
	var def store.QueueRecord
	if !r.a.call(func(a *actor) { def = a.lanes[r.lane].def }) {
		return fail(errorf(fibp.CodeQueueNotFound, "queue %q was deleted", req.Queue))
	}
	if e := b.checkUpdate(&def, req); e != nil {
		return fail(e)
	}
	if err := b.proposeMeta(putQueue(&def)); err != nil {
		return fail(errorf(fibp.CodeStorageError, "%v", err))
	}
	e, ok := r.a.commitCall(func(a *actor) *Error {
		a.lanes[r.lane].def = def
		a.syncConfig(r.lane)
		return nil
	})
	if !ok {
		return fail(errorf(fibp.CodeQueueNotFound, "queue %q was deleted", req.Queue))
	}
	if e != nil {
		return fail(e)
	}
	return &fibp.UpdateQueueResult{ErrorCode: fibp.CodeOk}, nil
}

// checkUpdate applies an UpdateQueue's present fields to def and validates the result.
func (b *Broker) checkUpdate(def *store.QueueRecord, req *fibp.UpdateQueue) *Error {
	set64 := func(dst *uint64, o interface{ Get() (uint64, bool) }) {
		if v, ok := o.Get(); ok {
			*dst = v
		}
	}
	set64(&def.VisibilityTimeoutMs, req.VisibilityTimeoutMs)
	set64(&def.DedupWindowMs, req.DedupWindowMs)
	set64(&def.BackoffInitialMs, req.BackoffInitialMs)
	set64(&def.BackoffMaxMs, req.BackoffMaxMs)
	set64(&def.ReclaimGraceMs, req.ReclaimGraceMs)
	if v, ok := req.MaxAttempts.Get(); ok {
		def.MaxAttempts = v
	}
	if v, ok := req.ParkDeadLetterAfter.Get(); ok {
		def.ParkDeadLetterAfter = v
	}
	if v, ok := req.Backoff.Get(); ok {
		def.Backoff = uint8(v)
	}
	if v, ok := req.DeliveryDurability.Get(); ok {
		def.DeliveryDurability = uint8(v)
	}
	if req.OnEnqueueChange == fibp.ScriptChangeRemove {
		def.OnEnqueueScript = ""
	}
	if req.OnFailureChange == fibp.ScriptChangeRemove {
		def.OnFailureScript = ""
	}
	cfg := b.engineConfig(def)
	if err := cfg.Validate(); err != nil {
		return errorf(fibp.CodeInvalidConfigValue, "%v", err)
	}
	return nil
}

// GetStats answers from the queue's live state.
func (b *Broker) GetStats(req *fibp.GetStats) (*fibp.GetStatsResult, *Error) {
	r := b.lookup(req.Queue)
	if r.a == nil {
		e := errorf(fibp.CodeQueueNotFound, "queue %q does not exist", req.Queue)
		return &fibp.GetStatsResult{ErrorCode: e.Code}, e
	}
	var s engine.Stats
	if !r.a.call(func(a *actor) { q := a.st.Lane(r.lane); q.Advance(a.now()); s = q.Stats() }) {
		e := errorf(fibp.CodeQueueNotFound, "queue %q was deleted", req.Queue)
		return &fibp.GetStatsResult{ErrorCode: e.Code}, e
	}
	res := &fibp.GetStatsResult{
		ErrorCode: fibp.CodeOk, Depth: s.Depth, InFlight: s.InFlight, Delayed: s.Delayed,
		ActiveFairnessKeys: s.ActiveFairnessKeys, ActiveConsumers: s.ActiveConsumers, Quantum: s.Quantum,
	}
	for _, k := range s.Keys {
		res.PerKeyStats = append(res.PerKeyStats, fibp.FairnessKeyStat{Key: k.Key, PendingCount: k.Pending, CurrentDeficit: k.Deficit, Weight: k.Weight})
	}
	return res, nil
}

// ListQueues lists every queue with its headline counters.
func (b *Broker) ListQueues(*fibp.ListQueues) (*fibp.ListQueuesResult, *Error) {
	res := &fibp.ListQueuesResult{ErrorCode: fibp.CodeOk}
	for _, name := range b.queueNames() {
		r := b.lookup(name)
		if r.a == nil {
			continue
		}
		var s engine.Stats
		if r.a.call(func(a *actor) { s = a.st.Lane(r.lane).Stats() }) {
			res.Queues = append(res.Queues, fibp.QueueInfo{Name: name, Depth: s.Depth, InFlight: s.InFlight, ActiveConsumers: s.ActiveConsumers})
		}
	}
	return res, nil
}

// Redrive moves up to count dead-lettered messages (0 = all), oldest first, back to the parent.
// Messages in flight in the dead-letter queue stay there.
func (b *Broker) Redrive(req *fibp.Redrive) (*fibp.RedriveResult, *Error) {
	fail := func(e *Error) (*fibp.RedriveResult, *Error) { return &fibp.RedriveResult{ErrorCode: e.Code}, e }
	r := b.lookup(req.DLQQueue)
	switch {
	case r.a == nil:
		return fail(errorf(fibp.CodeQueueNotFound, "queue %q does not exist", req.DLQQueue))
	case r.lane != queuegroup.LaneDeadLetter:
		return fail(errorf(fibp.CodeNotADLQ, "queue %q is not a dead-letter queue", req.DLQQueue))
	case req.Reclassify > fibp.ReclassifyNone:
		return fail(errorf(fibp.CodeInvalidConfigValue, "reclassify %d is not one of 0..2", req.Reclassify))
	}
	var moved int
	e, ok := r.a.commitCall(func(a *actor) *Error {
		var ids []engine.MsgID
		for m := range a.st.Lane(queuegroup.LaneDeadLetter).Messages() {
			if m.State != engine.StateLeased {
				ids = append(ids, m.ID)
			}
			if req.Count > 0 && uint64(len(ids)) == req.Count {
				break
			}
		}
		n, err := a.st.Redrive(a.now(), ids)
		moved = n
		if err != nil {
			return errorf(fibp.CodeInternalError, "%v", err)
		}
		return nil
	})
	if !ok {
		return fail(errorf(fibp.CodeQueueNotFound, "queue %q was deleted", req.DLQQueue))
	}
	if e != nil {
		return fail(e)
	}
	return &fibp.RedriveResult{ErrorCode: fibp.CodeOk, Redriven: uint64(moved)}, nil
}

// ListConfig lists runtime config entries whose key starts with prefix, with the current value
// of every key the broker understands.
func (b *Broker) ListConfig(req *fibp.ListConfig) (*fibp.ListConfigResult, *Error) {
	b.mu.RLock()
	entries := map[string]string{}
	for k, v := range b.config {
		entries[k] = v
	}
	for _, k := range knownKeys() {
		entries[k] = knownConfig[k].get(&b.defaults)
	}
	b.mu.RUnlock()
	res := &fibp.ListConfigResult{ErrorCode: fibp.CodeOk}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		if strings.HasPrefix(k, req.Prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.Entries = append(res.Entries, fibp.ConfigEntry{Key: k, Value: entries[k]})
	}
	return res, nil
}

// GetConfig reads one runtime config entry; an unset key answers InvalidConfigValue.
func (b *Broker) GetConfig(req *fibp.GetConfig) (*fibp.GetConfigResult, *Error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if key, ok := knownConfig[req.Key]; ok {
		return &fibp.GetConfigResult{ErrorCode: fibp.CodeOk, Value: key.get(&b.defaults)}, nil
	}
	if v, ok := b.config[req.Key]; ok {
		return &fibp.GetConfigResult{ErrorCode: fibp.CodeOk, Value: v}, nil
	}
	e := errorf(fibp.CodeInvalidConfigValue, "config key %q is not set", req.Key)
	return &fibp.GetConfigResult{ErrorCode: e.Code}, e
}

// SetConfig stores a runtime config entry; keys the broker understands are validated and take
// effect at once.
func (b *Broker) SetConfig(req *fibp.SetConfig) (*fibp.SetConfigResult, *Error) {
	fail := func(e *Error) (*fibp.SetConfigResult, *Error) { return &fibp.SetConfigResult{ErrorCode: e.Code}, e }
	if req.Key == "" {
		return fail(errorf(fibp.CodeInvalidConfigValue, "config key must not be empty"))
	}
	key, known := knownConfig[req.Key]
	if known {
		d := b.currentDefaults()
		if err := key.apply(&d, req.Value); err != nil {
			return fail(errorf(fibp.CodeInvalidConfigValue, "%s: %v", req.Key, err))
		}
	}
	b.adminMu.Lock() // config writes commit in the order they are applied
	defer b.adminMu.Unlock()
	if err := b.proposeMeta(&queuelog.SetConfig{Key: req.Key, Value: req.Value}); err != nil {
		return fail(errorf(fibp.CodeStorageError, "%v", err))
	}
	b.mu.Lock()
	b.config[req.Key] = req.Value
	if known {
		_ = key.apply(&b.defaults, req.Value) // validated above
	}
	actors := map[*actor]bool{}
	for _, r := range b.queues {
		actors[r.a] = true
	}
	b.mu.Unlock()
	if known {
		for a := range actors {
			a.internal.push(func(a *actor) {
				for l := range a.lanes {
					a.syncConfig(queuegroup.Lane(l))
				}
			})
		}
	}
	return &fibp.SetConfigResult{ErrorCode: fibp.CodeOk}, nil
}

// Rebalancing state is kept in the runtime config store (cluster-wide state in a cluster), under
// these keys, so that it survives restarts.
const (
	rebalancingKey     = "cluster.rebalancing"
	rebalancingEndsKey = "cluster.rebalancing_pause_ends_at"
)

// rebalancing returns the current mode and pause end; a pause that has run out reads as enabled.
func (b *Broker) rebalancing() (fibp.RebalancingMode, uint64) {
	b.mu.RLock()
	mode, ends := b.config[rebalancingKey], b.config[rebalancingEndsKey]
	b.mu.RUnlock()
	switch mode {
	case "disabled":
		return fibp.RebalancingDisabled, 0
	case "paused":
		end, _ := strconv.ParseUint(ends, 10, 64)
		if uint64(b.clock().UnixMilli()) < end {
			return fibp.RebalancingPaused, end
		}
	}
	return fibp.RebalancingEnabled, 0
}

// SetRebalancing enables, pauses (for pause_ms) or disables rebalancing. On a single node there is
// nothing to move, but the state is kept and reported as a cluster would.
func (b *Broker) SetRebalancing(req *fibp.SetRebalancing) (*fibp.SetRebalancingResult, *Error) {
	fail := func(e *Error) (*fibp.SetRebalancingResult, *Error) {
		return &fibp.SetRebalancingResult{ErrorCode: e.Code}, e
	}
	var mode, ends string
	switch req.Mode {
	case fibp.RebalancingEnabled:
		mode = "enabled"
	case fibp.RebalancingPaused:
		if req.PauseMs == 0 {
			return fail(errorf(fibp.CodeInvalidConfigValue, "a pause needs pause_ms > 0"))
		}
		mode, ends = "paused", strconv.FormatUint(uint64(b.clock().UnixMilli())+req.PauseMs, 10)
	case fibp.RebalancingDisabled:
		mode = "disabled"
	default:
		return fail(errorf(fibp.CodeInvalidConfigValue, "rebalancing mode %d is not 0, 1 or 2", req.Mode))
	}
	for _, kv := range [][2]string{{rebalancingKey, mode}, {rebalancingEndsKey, ends}} {
		if res, e := b.SetConfig(&fibp.SetConfig{Key: kv[0], Value: kv[1]}); e != nil {
			return fail(&Error{Code: res.ErrorCode, Message: e.Message})
		}
	}
	return &fibp.SetRebalancingResult{ErrorCode: fibp.CodeOk}, nil
}

// GetClusterStatus describes the single node, which leads every queue.
func (b *Broker) GetClusterStatus(*fibp.GetClusterStatus) (*fibp.GetClusterStatusResult, *Error) {
	mode, ends := b.rebalancing()
	return &fibp.GetClusterStatusResult{
		ErrorCode: fibp.CodeOk, Rebalancing: mode, RebalancingPauseEndsAt: ends,
		Nodes: []fibp.NodeStatus{{State: fibp.NodeStateUp, QueueLeaderships: uint32(len(b.queueNames()))}},
	}, nil
}

// GetRoutes answers that this node leads every queue (node 0: single-node mode).
func (b *Broker) GetRoutes(req *fibp.GetRoutes, selfAddr string) (*fibp.GetRoutesResult, *Error) {
	names := make([]string, 0, len(req.Queues))
	for _, q := range req.Queues {
		names = append(names, q.Queue)
	}
	if len(names) == 0 {
		names = b.queueNames()
	}
	res := &fibp.GetRoutesResult{ErrorCode: fibp.CodeOk}
	for _, n := range names {
		if b.lookup(n).a == nil {
			e := errorf(fibp.CodeQueueNotFound, "queue %q does not exist", n)
			return &fibp.GetRoutesResult{ErrorCode: e.Code}, e
		}
		res.Entries = append(res.Entries, fibp.RouteEntry{Queue: n, LeaderAddr: selfAddr})
	}
	return res, nil
}
