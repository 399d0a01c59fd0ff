package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
)

// Node is what the admin operations report about the node serving the connection.
type Node struct {
	ID   uint64 // 0 in single-node mode
	Addr string // the address clients should use
}

// AdminHandler decodes one admin request body and runs it against b. It returns the result frame
// and the broker failure behind it (nil on success; the transport logs it), or, when the body is
// malformed, the decoding error. A nil frame with a failure is answered as an Error frame: a
// refusal whose reason the result frame's error code cannot carry (Explained) is answered so.
type AdminHandler func(b *broker.Broker, n Node, body []byte) (fibp.Frame, *broker.Error, error)

// Admin returns the handler of an admin opcode.
func Admin(op fibp.Opcode) (AdminHandler, bool) {
	h, ok := adminOps[op]
	return h, ok
}

func adminOp[T any, P interface {
	*T
	fibp.Frame
}](run func(b *broker.Broker, n Node, req P) (fibp.Frame, *broker.Error)) AdminHandler {
	return func(b *broker.Broker, n Node, body []byte) (fibp.Frame, *broker.Error, error) {
		req := P(new(T))
		if err := req.Decode(body); err != nil {
			return nil, nil, err
		}
		res, e := run(b, n, req)
		if Explained(e) && (res == nil || res.Opcode() != fibp.OpGetConfigResult) {
			return nil, e, nil
		}
		return res, e, nil
	}
}

// Explained reports whether an admin refusal is answered with an Error frame, whose message says
// why, instead of the result frame's bare error code: a value rejected (which value, and what it
// may be), a setting fixed at creation, a script that does not compile, a limit reached, a
// storage or internal failure. A missing or existing subject (QueueNotFound, ApiKeyNotFound,
// QueueAlreadyExists, NotADLQ, ...) keeps the result frame: its code says all, and the client
// knows the subject. GetConfig keeps its result frame for an unset key, as the spec defines it.
func Explained(e *broker.Error) bool {
	if e == nil || e.Message == "" {
		return false
	}
	switch e.Code {
	case broker.CodeInvalidConfigValue, broker.CodeImmutableSetting, broker.CodeLuaCompilationError,
		broker.CodeChannelFull, broker.CodeStorageError, broker.CodeInternalError:
		return true
	}
	return false
}

// code is the FIBP error code of an admin failure (Ok when there is none).
func code(e *broker.Error) fibp.ErrorCode {
	if e == nil {
		return fibp.CodeOk
	}
	return ErrorCode(e.Code)
}

// adminOps maps every admin opcode to its handler.
var adminOps = map[fibp.Opcode]AdminHandler{
	fibp.OpGetThrottleStats:  getThrottleStats,
	fibp.OpGetThrottleBucket: getThrottleBucket,
	fibp.OpCreateQueue: adminOp(func(b *broker.Broker, _ Node, r *fibp.CreateQueue) (fibp.Frame, *broker.Error) {
		if e := b.CreateQueue(QueueSpec(r)); e != nil {
			return &fibp.CreateQueueResult{ErrorCode: code(e)}, e
		}
		return &fibp.CreateQueueResult{ErrorCode: fibp.CodeOk, QueueID: r.Name}, nil
	}),
	fibp.OpDeleteQueue: adminOp(func(b *broker.Broker, _ Node, r *fibp.DeleteQueue) (fibp.Frame, *broker.Error) {
		e := b.DeleteQueue(r.Queue)
		return &fibp.DeleteQueueResult{ErrorCode: code(e)}, e
	}),
	fibp.OpUpdateQueue: adminOp(func(b *broker.Broker, _ Node, r *fibp.UpdateQueue) (fibp.Frame, *broker.Error) {
		e := b.UpdateQueue(QueueUpdate(r))
		return &fibp.UpdateQueueResult{ErrorCode: code(e)}, e
	}),
	fibp.OpGetStats: adminOp(func(b *broker.Broker, _ Node, r *fibp.GetStats) (fibp.Frame, *broker.Error) {
		s, e := b.GetStats(r.Queue)
		if e != nil {
			return &fibp.GetStatsResult{ErrorCode: code(e)}, e
		}
		res := StatsResult(&s)
		if def, e := b.Definition(r.Queue); e == nil {
			res.Settings = Settings(&def)
		}
		return res, nil
	}),
	fibp.OpListQueues: adminOp(func(b *broker.Broker, _ Node, _ *fibp.ListQueues) (fibp.Frame, *broker.Error) {
		res := &fibp.ListQueuesResult{ErrorCode: fibp.CodeOk}
		for _, q := range b.ListQueues() {
			res.Queues = append(res.Queues, fibp.QueueInfo{Name: q.Name, Depth: q.Depth, InFlight: q.InFlight, ActiveConsumers: q.ActiveConsumers})
		}
		return res, nil
	}),
	fibp.OpSetConfig: adminOp(func(b *broker.Broker, _ Node, r *fibp.SetConfig) (fibp.Frame, *broker.Error) {
		e := b.SetConfig(r.Key, r.Value) // refused: an Error frame that says why and lists the valid keys
		return &fibp.SetConfigResult{ErrorCode: code(e)}, e
	}),
	fibp.OpGetConfig: adminOp(func(b *broker.Broker, _ Node, r *fibp.GetConfig) (fibp.Frame, *broker.Error) {
		v, e := b.GetConfig(r.Key)
		return &fibp.GetConfigResult{ErrorCode: code(e), Value: v}, e
	}),
	fibp.OpListConfig: adminOp(func(b *broker.Broker, _ Node, r *fibp.ListConfig) (fibp.Frame, *broker.Error) {
		res := &fibp.ListConfigResult{ErrorCode: fibp.CodeOk}
		for _, c := range b.ListConfig(r.Prefix) {
			res.Entries = append(res.Entries, fibp.ConfigEntry{Key: c.Key, Value: c.Value})
		}
		return res, nil
	}),
	fibp.OpRedrive: adminOp(func(b *broker.Broker, _ Node, r *fibp.Redrive) (fibp.Frame, *broker.Error) {
		n, e := b.Redrive(r.DLQQueue, r.Count, uint8(r.Reclassify))
		return &fibp.RedriveResult{ErrorCode: code(e), Redriven: n.Redriven, LeftUnclassified: n.LeftUnclassified,
			RejectedByScript: n.RejectedByScript}, e
	}),
	fibp.OpGetClusterStatus: adminOp(func(b *broker.Broker, n Node, _ *fibp.GetClusterStatus) (fibp.Frame, *broker.Error) {
		s := b.GetClusterStatus()
		return &fibp.GetClusterStatusResult{
			ErrorCode: fibp.CodeOk, Rebalancing: fibp.RebalancingMode(s.Rebalancing), RebalancingPauseEndsAt: s.PauseEndsAt,
			Nodes: []fibp.NodeStatus{{NodeID: n.ID, Addr: n.Addr, State: fibp.NodeStateUp, QueueLeaderships: s.QueueLeaderships}},
		}, nil
	}),
	fibp.OpGetRoutes: adminOp(func(b *broker.Broker, n Node, r *fibp.GetRoutes) (fibp.Frame, *broker.Error) {
		queues := make([]string, 0, len(r.Queues))
		for _, q := range r.Queues {
			queues = append(queues, q.Queue)
		}
		names, e := b.Routes(queues)
		if e != nil {
			return &fibp.GetRoutesResult{ErrorCode: code(e)}, e
		}
		res := &fibp.GetRoutesResult{ErrorCode: fibp.CodeOk}
		for _, q := range names {
			res.Entries = append(res.Entries, fibp.RouteEntry{Queue: q, LeaderAddr: n.Addr})
		}
		return res, nil
	}),
	fibp.OpDrainNode: adminOp(func(_ *broker.Broker, n Node, r *fibp.DrainNode) (fibp.Frame, *broker.Error) {
		if r.NodeID != n.ID {
			return &fibp.DrainNodeResult{ErrorCode: fibp.CodeNodeNotFound}, nil
		}
		return &fibp.DrainNodeResult{ErrorCode: fibp.CodeOk}, nil // a single node has no other node to move leaders to
	}),
	fibp.OpMoveQueueLeader: adminOp(func(b *broker.Broker, n Node, r *fibp.MoveQueueLeader) (fibp.Frame, *broker.Error) {
		if _, e := b.GetStats(r.Queue); e != nil {
			return &fibp.MoveQueueLeaderResult{ErrorCode: code(e)}, nil
		}
		if r.TargetNodeID != n.ID {
			return &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeNodeNotFound}, nil
		}
		return &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeOk}, nil
	}),
	fibp.OpSetRebalancing: adminOp(func(b *broker.Broker, _ Node, r *fibp.SetRebalancing) (fibp.Frame, *broker.Error) {
		e := b.SetRebalancing(broker.RebalancingMode(r.Mode), r.PauseMs)
		return &fibp.SetRebalancingResult{ErrorCode: code(e)}, e
	}),
	fibp.OpCreateAPIKey: adminOp(createAPIKey),
	fibp.OpRevokeAPIKey: adminOp(revokeAPIKey),
	fibp.OpListAPIKeys:  adminOp(listAPIKeys),
	fibp.OpSetACL:       adminOp(setACL),
	fibp.OpGetACL:       adminOp(getACL),
}

// QueueSpec converts a CreateQueue (enumerations keep their numbering; the broker checks them).
func QueueSpec(r *fibp.CreateQueue) broker.QueueSpec {
	return broker.QueueSpec{
		Name:            r.Name,
		OnEnqueueScript: r.OnEnqueueScript.Value, HasOnEnqueue: r.OnEnqueueScript.Present,
		OnFailureScript: r.OnFailureScript.Value, HasOnFailure: r.OnFailureScript.Present,
		OrderingKey: KeyFromWire(r.OrderingKey), DedupKey: KeyFromWire(r.DedupKey),
		VisibilityTimeoutMs: r.VisibilityTimeoutMs, Ordering: store.Ordering(r.Ordering), WhenOrderingKeyMissing: store.WhenOrderingKeyMissing(r.WhenOrderingKeyMissing),
		DedupWindowMs: r.DedupWindowMs, ScriptFailure: store.ScriptFailure(r.ScriptFailure), ParkDeadLetterAfter: r.ParkDeadLetterAfter,
		MaxAttempts: r.MaxAttempts, Backoff: engine.Backoff(r.Backoff), BackoffInitialMs: r.BackoffInitialMs, BackoffMaxMs: r.BackoffMaxMs,
		DeliveryDurability: store.DeliveryDurability(r.DeliveryDurability), ReclaimGraceMs: r.ReclaimGraceMs,
	}
}

// KeyFromWire converts a FIBP key (the part kinds share their numbering).
func KeyFromWire(fk fibp.Key) keys.Key {
	if len(fk) == 0 {
		return nil
	}
	k := make(keys.Key, len(fk))
	for i, p := range fk {
		k[i] = keys.Part{Kind: keys.Kind(p.Kind), Name: p.Name}
	}
	return k
}

// opt is a pointer to an optional field's value, nil when it is absent.
func opt[T, U any](o wire.Optional[T], conv func(T) U) *U {
	if !o.Present {
		return nil
	}
	v := conv(o.Value)
	return &v
}

func same[T any](v T) T { return v }

// QueueUpdate converts an UpdateQueue.
func QueueUpdate(r *fibp.UpdateQueue) broker.QueueUpdate {
	return broker.QueueUpdate{
		Queue: r.Queue, OnEnqueueChange: uint8(r.OnEnqueueChange), OnFailureChange: uint8(r.OnFailureChange),
		OnEnqueueScript: r.OnEnqueueScript, OnFailureScript: r.OnFailureScript,
		VisibilityTimeoutMs: opt(r.VisibilityTimeoutMs, same), DedupWindowMs: opt(r.DedupWindowMs, same),
		MaxAttempts: opt(r.MaxAttempts, same), Backoff: opt(r.Backoff, func(b fibp.Backoff) engine.Backoff { return engine.Backoff(b) }),
		BackoffInitialMs: opt(r.BackoffInitialMs, same), BackoffMaxMs: opt(r.BackoffMaxMs, same),
		ParkDeadLetterAfter: opt(r.ParkDeadLetterAfter, same), ReclaimGraceMs: opt(r.ReclaimGraceMs, same),
		DeliveryDurability: opt(r.DeliveryDurability, func(d fibp.DeliveryDurability) store.DeliveryDurability { return store.DeliveryDurability(d) }),
	}
}

// StatsResult is the GetStatsResult frame of a queue's stats.
func StatsResult(s *broker.QueueStats) *fibp.GetStatsResult {
	res := &fibp.GetStatsResult{
		ErrorCode: fibp.CodeOk, Depth: s.Depth, InFlight: s.InFlight, Delayed: s.Delayed, Throttled: s.Throttled,
		Unclassified: s.Unclassified, OldestUnclassifiedAt: uint64(max(s.OldestUnclassifiedAt, 0)),
		ActiveFairnessKeys: s.ActiveFairnessKeys, ActiveConsumers: s.ActiveConsumers, Quantum: s.Quantum,
		OrderingGroups: s.OrderingGroups, OrderingGroupsBlocked: s.BlockedGroups,
	}
	for i := range s.Throttles {
		res.ActiveThrottles = append(res.ActiveThrottles, ThrottleSummary(&s.Throttles[i]))
	}
	for _, k := range s.Keys {
		res.PerKeyStats = append(res.PerKeyStats, fibp.FairnessKeyStat{Key: k.Key, PendingCount: k.Pending, CurrentDeficit: k.Deficit, Weight: k.Weight})
	}
	return res
}
