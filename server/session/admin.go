package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
)

// Node is what the admin operations report about the node serving the connection.
type Node struct {
	ID   uint64 // 0 in single-node mode
	Addr string // the address clients should use
}

// AdminHandler decodes one admin request body and runs it against svc. It returns the result
// frame and the service's failure behind it (nil on success; the transport logs it), or, when the body is
// malformed, the decoding error. A nil frame with a failure is answered as an Error frame: a
// refusal whose reason the result frame's error code cannot carry (Explained) is answered so.
type AdminHandler func(svc service.Service, n Node, body []byte) (fibp.Frame, *service.Error, error)

// Admin returns the handler of an admin opcode.
func Admin(op fibp.Opcode) (AdminHandler, bool) {
	h, ok := adminOps[op]
	return h, ok
}

func adminOp[T any, P interface {
	*T
	fibp.Frame
}](run func(svc service.Service, n Node, req P) (fibp.Frame, *service.Error)) AdminHandler {
	return func(svc service.Service, n Node, body []byte) (fibp.Frame, *service.Error, error) {
		req := P(new(T))
		if err := req.Decode(body); err != nil {
			return nil, nil, err
		}
		res, e := run(svc, n, req)
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
func Explained(e *service.Error) bool {
	if e == nil || e.Message == "" {
		return false
	}
	switch e.Code {
	case service.CodeInvalidConfigValue, service.CodeImmutableSetting, service.CodeLuaCompilationError,
		service.CodeChannelFull, service.CodeStorageError, service.CodeInternalError:
		return true
	}
	return false
}

// code is the FIBP error code of an admin failure (Ok when there is none).
func code(e *service.Error) fibp.ErrorCode {
	if e == nil {
		return fibp.CodeOk
	}
	return ErrorCode(e.Code)
}

// adminOps maps every admin opcode to its handler.
var adminOps = map[fibp.Opcode]AdminHandler{
	fibp.OpGetThrottleStats:  getThrottleStats,
	fibp.OpGetThrottleBucket: getThrottleBucket,
	fibp.OpCreateQueue: adminOp(func(svc service.Service, _ Node, r *fibp.CreateQueue) (fibp.Frame, *service.Error) {
		if e := svc.CreateQueue(QueueSpec(r)); e != nil {
			return &fibp.CreateQueueResult{ErrorCode: code(e)}, e
		}
		return &fibp.CreateQueueResult{ErrorCode: fibp.CodeOk, QueueID: r.Name}, nil
	}),
	fibp.OpDeleteQueue: adminOp(func(svc service.Service, _ Node, r *fibp.DeleteQueue) (fibp.Frame, *service.Error) {
		e := svc.DeleteQueue(r.Queue)
		return &fibp.DeleteQueueResult{ErrorCode: code(e)}, e
	}),
	fibp.OpUpdateQueue: adminOp(func(svc service.Service, _ Node, r *fibp.UpdateQueue) (fibp.Frame, *service.Error) {
		e := svc.UpdateQueue(QueueUpdate(r))
		return &fibp.UpdateQueueResult{ErrorCode: code(e)}, e
	}),
	fibp.OpGetStats: adminOp(func(svc service.Service, _ Node, r *fibp.GetStats) (fibp.Frame, *service.Error) {
		s, e := svc.GetStats(r.Queue)
		if e != nil {
			return &fibp.GetStatsResult{ErrorCode: code(e)}, e
		}
		res := StatsResult(&s)
		if def, e := svc.Definition(r.Queue); e == nil {
			res.Settings = Settings(&def)
		}
		return res, nil
	}),
	fibp.OpListQueues: adminOp(func(svc service.Service, _ Node, _ *fibp.ListQueues) (fibp.Frame, *service.Error) {
		res := &fibp.ListQueuesResult{ErrorCode: fibp.CodeOk}
		for _, q := range svc.ListQueues() {
			res.Queues = append(res.Queues, fibp.QueueInfo{Name: q.Name, Depth: q.Depth, InFlight: q.InFlight, ActiveConsumers: q.ActiveConsumers})
		}
		return res, nil
	}),
	fibp.OpSetConfig: adminOp(func(svc service.Service, _ Node, r *fibp.SetConfig) (fibp.Frame, *service.Error) {
		e := svc.SetConfig(r.Key, r.Value) // refused: an Error frame that says why and lists the valid keys
		return &fibp.SetConfigResult{ErrorCode: code(e)}, e
	}),
	fibp.OpGetConfig: adminOp(func(svc service.Service, _ Node, r *fibp.GetConfig) (fibp.Frame, *service.Error) {
		v, e := svc.GetConfig(r.Key)
		return &fibp.GetConfigResult{ErrorCode: code(e), Value: v}, e
	}),
	fibp.OpListConfig: adminOp(func(svc service.Service, _ Node, r *fibp.ListConfig) (fibp.Frame, *service.Error) {
		res := &fibp.ListConfigResult{ErrorCode: fibp.CodeOk}
		for _, c := range svc.ListConfig(r.Prefix) {
			res.Entries = append(res.Entries, fibp.ConfigEntry{Key: c.Key, Value: c.Value})
		}
		return res, nil
	}),
	fibp.OpRedrive: adminOp(func(svc service.Service, _ Node, r *fibp.Redrive) (fibp.Frame, *service.Error) {
		n, e := svc.Redrive(r.DLQQueue, r.Count, reclassify(r.Reclassify))
		return &fibp.RedriveResult{ErrorCode: code(e), Redriven: n.Redriven, LeftUnclassified: n.LeftUnclassified,
			RejectedByScript: n.RejectedByScript}, e
	}),
	fibp.OpGetClusterStatus: adminOp(func(svc service.Service, n Node, _ *fibp.GetClusterStatus) (fibp.Frame, *service.Error) {
		s := svc.GetClusterStatus()
		res := &fibp.GetClusterStatusResult{
			ErrorCode: fibp.CodeOk, Rebalancing: wireRebalancing(s.Rebalancing), RebalancingPauseEndsAt: s.PauseEndsAt,
			Nodes: []fibp.NodeStatus{{NodeID: n.ID, Addr: n.Addr, State: fibp.NodeStateUp, QueueLeaderships: s.QueueLeaderships}},
		}
		if nodes, metaLeader, ok := clusterNodes(svc); ok {
			res.MetaLeaderNodeID, res.Nodes = metaLeader, nodes
		}
		return res, nil
	}),
	fibp.OpGetRoutes: adminOp(func(svc service.Service, n Node, r *fibp.GetRoutes) (fibp.Frame, *service.Error) {
		queues := make([]string, 0, len(r.Queues))
		for _, q := range r.Queues {
			queues = append(queues, q.Queue)
		}
		if res, e, ok := clusterRoutes(svc, queues); ok {
			return res, e
		}
		names, e := svc.Routes(queues)
		if e != nil {
			return &fibp.GetRoutesResult{ErrorCode: code(e)}, e
		}
		res := &fibp.GetRoutesResult{ErrorCode: fibp.CodeOk}
		sh, _ := svc.(service.Sharding)
		for _, q := range names {
			e := fibp.RouteEntry{Queue: q, LeaderAddr: n.Addr}
			if shards := shardCount(sh, q); shards > 1 { // a sharded queue's shards: all of them here
				for i := range shards {
					e.Shards = append(e.Shards, fibp.ShardRoute{ShardIndex: i, LeaderNodeID: n.ID, LeaderAddr: n.Addr})
				}
			}
			res.Entries = append(res.Entries, e)
		}
		return res, nil
	}),
	fibp.OpDrainNode: adminOp(func(svc service.Service, n Node, r *fibp.DrainNode) (fibp.Frame, *service.Error) {
		if c, ok := svc.(service.Cluster); ok {
			if ok, e := c.DrainNode(r.NodeID, r.Drain); ok {
				return &fibp.DrainNodeResult{ErrorCode: code(e)}, e
			}
		}
		if r.NodeID != n.ID {
			return &fibp.DrainNodeResult{ErrorCode: fibp.CodeNodeNotFound}, nil
		}
		return &fibp.DrainNodeResult{ErrorCode: fibp.CodeOk}, nil // a single node has no other node to move leaders to
	}),
	fibp.OpMoveQueueLeader: adminOp(func(svc service.Service, n Node, r *fibp.MoveQueueLeader) (fibp.Frame, *service.Error) {
		if c, ok := svc.(service.Cluster); ok {
			if ok, e := c.MoveQueueLeader(r.Queue, r.TargetNodeID); ok {
				return &fibp.MoveQueueLeaderResult{ErrorCode: code(e)}, e
			}
		}
		if _, e := svc.GetStats(r.Queue); e != nil {
			return &fibp.MoveQueueLeaderResult{ErrorCode: code(e)}, nil
		}
		if r.TargetNodeID != n.ID {
			return &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeNodeNotFound}, nil
		}
		return &fibp.MoveQueueLeaderResult{ErrorCode: fibp.CodeOk}, nil
	}),
	fibp.OpSetRebalancing: adminOp(func(svc service.Service, _ Node, r *fibp.SetRebalancing) (fibp.Frame, *service.Error) {
		e := svc.SetRebalancing(rebalancing(r.Mode), r.PauseMs)
		return &fibp.SetRebalancingResult{ErrorCode: code(e)}, e
	}),
	fibp.OpCreateAPIKey: adminOp(createAPIKey),
	fibp.OpRevokeAPIKey: adminOp(revokeAPIKey),
	fibp.OpListAPIKeys:  adminOp(listAPIKeys),
	fibp.OpSetACL:       adminOp(setACL),
	fibp.OpGetACL:       adminOp(getACL),
}

// QueueSpec converts a CreateQueue (unknown enumeration values pass through; the service refuses
// them).
func QueueSpec(r *fibp.CreateQueue) service.QueueSpec {
	return service.QueueSpec{
		Name:            r.Name,
		OnEnqueueScript: r.OnEnqueueScript.Value, HasOnEnqueue: r.OnEnqueueScript.Present,
		OnFailureScript: r.OnFailureScript.Value, HasOnFailure: r.OnFailureScript.Present,
		OrderingKey: KeyFromWire(r.OrderingKey), DedupKey: KeyFromWire(r.DedupKey),
		VisibilityTimeoutMs: r.VisibilityTimeoutMs, Ordering: ordering(r.Ordering), WhenOrderingKeyMissing: whenOrderingKeyMissing(r.WhenOrderingKeyMissing),
		DedupWindowMs: r.DedupWindowMs, ScriptFailure: scriptFailure(r.ScriptFailure), ParkDeadLetterAfter: r.ParkDeadLetterAfter,
		MaxAttempts: r.MaxAttempts, Backoff: backoff(r.Backoff), BackoffInitialMs: r.BackoffInitialMs, BackoffMaxMs: r.BackoffMaxMs,
		DeliveryDurability: deliveryDurability(r.DeliveryDurability), ReclaimGraceMs: r.ReclaimGraceMs,
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
func QueueUpdate(r *fibp.UpdateQueue) service.QueueUpdate {
	return service.QueueUpdate{
		Queue: r.Queue, OnEnqueueChange: scriptChange(r.OnEnqueueChange), OnFailureChange: scriptChange(r.OnFailureChange),
		OnEnqueueScript: r.OnEnqueueScript, OnFailureScript: r.OnFailureScript,
		VisibilityTimeoutMs: opt(r.VisibilityTimeoutMs, same), DedupWindowMs: opt(r.DedupWindowMs, same),
		MaxAttempts: opt(r.MaxAttempts, same), Backoff: opt(r.Backoff, backoff),
		BackoffInitialMs: opt(r.BackoffInitialMs, same), BackoffMaxMs: opt(r.BackoffMaxMs, same),
		ParkDeadLetterAfter: opt(r.ParkDeadLetterAfter, same), ReclaimGraceMs: opt(r.ReclaimGraceMs, same),
		DeliveryDurability: opt(r.DeliveryDurability, deliveryDurability),
	}
}

// StatsResult is the GetStatsResult frame of a queue's stats.
func StatsResult(s *service.QueueStats) *fibp.GetStatsResult {
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

// shardCount is queue's shard count, 1 for a service without sharded queues.
func shardCount(sh service.Sharding, queue string) uint32 {
	if sh == nil {
		return 1
	}
	return sh.ShardCount(queue)
}
