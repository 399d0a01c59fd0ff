package fila

import (
	"context"
	"strconv"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// QueueConfig is every setting of CreateQueue. Zero values mean the broker's configured
// default (concepts.md); empty scripts mean none.
type QueueConfig struct {
	Name                   string
	OnEnqueueScript        string
	OnFailureScript        string
	VisibilityTimeout      time.Duration
	Ordering               Ordering
	OrderingKey            Key // ordering = grouped only
	WhenOrderingKeyMissing WhenOrderingKeyMissing
	DedupKey               Key
	DedupWindow            time.Duration
	ScriptFailure          ScriptFailure
	ParkDeadLetterAfter    uint32 // 0 = the server's defaults.park_dead_letter_after
	MaxAttempts            uint32
	Backoff                Backoff
	BackoffInitial         time.Duration
	BackoffMax             time.Duration
	DeliveryDurability     DeliveryDurability
	ReclaimGrace           time.Duration
}

// CreateQueue creates a queue (and its dead-letter queue <name>.dlq), returning its queue ID.
func (c *Client) CreateQueue(ctx context.Context, q QueueConfig) (string, error) {
	req := &fibp.CreateQueue{
		Name:                   q.Name,
		VisibilityTimeoutMs:    durationMs(q.VisibilityTimeout),
		Ordering:               q.Ordering,
		OrderingKey:            q.OrderingKey,
		WhenOrderingKeyMissing: q.WhenOrderingKeyMissing,
		DedupKey:               q.DedupKey,
		DedupWindowMs:          durationMs(q.DedupWindow),
		ScriptFailure:          q.ScriptFailure,
		ParkDeadLetterAfter:    q.ParkDeadLetterAfter,
		MaxAttempts:            q.MaxAttempts,
		Backoff:                q.Backoff,
		BackoffInitialMs:       durationMs(q.BackoffInitial),
		BackoffMaxMs:           durationMs(q.BackoffMax),
		DeliveryDurability:     q.DeliveryDurability,
		ReclaimGraceMs:         durationMs(q.ReclaimGrace),
	}
	if q.OnEnqueueScript != "" {
		req.OnEnqueueScript = wire.Some(q.OnEnqueueScript)
	}
	if q.OnFailureScript != "" {
		req.OnFailureScript = wire.Some(q.OnFailureScript)
	}
	res, err := roundTrip[fibp.CreateQueueResult](ctx, c, req)
	if err != nil {
		return "", err
	}
	return res.QueueID, resultError(res.ErrorCode, queueSubject(q.Name))
}

// QueueUpdate lists the settings UpdateQueue changes; nil fields stay as they are. A script is
// set by a non-nil pointer and removed by the matching Remove flag.
type QueueUpdate struct {
	OnEnqueueScript     *string
	RemoveOnEnqueue     bool
	OnFailureScript     *string
	RemoveOnFailure     bool
	VisibilityTimeout   *time.Duration
	DedupWindow         *time.Duration
	MaxAttempts         *uint32
	Backoff             *Backoff
	BackoffInitial      *time.Duration
	BackoffMax          *time.Duration
	DeliveryDurability  *DeliveryDurability
	ReclaimGrace        *time.Duration
	ParkDeadLetterAfter *uint32
}

// UpdateQueue changes a queue's mutable settings.
func (c *Client) UpdateQueue(ctx context.Context, name string, u QueueUpdate) error {
	req := &fibp.UpdateQueue{
		Queue:               name,
		VisibilityTimeoutMs: optDuration(u.VisibilityTimeout),
		DedupWindowMs:       optDuration(u.DedupWindow),
		MaxAttempts:         opt(u.MaxAttempts),
		Backoff:             opt(u.Backoff),
		BackoffInitialMs:    optDuration(u.BackoffInitial),
		BackoffMaxMs:        optDuration(u.BackoffMax),
		DeliveryDurability:  opt(u.DeliveryDurability),
		ReclaimGraceMs:      optDuration(u.ReclaimGrace),
		ParkDeadLetterAfter: opt(u.ParkDeadLetterAfter),
	}
	req.OnEnqueueChange, req.OnEnqueueScript = scriptChange(u.OnEnqueueScript, u.RemoveOnEnqueue)
	req.OnFailureChange, req.OnFailureScript = scriptChange(u.OnFailureScript, u.RemoveOnFailure)
	res, err := roundTrip[fibp.UpdateQueueResult](ctx, c, req)
	if err != nil {
		return err
	}
	return resultError(res.ErrorCode, queueSubject(name))
}

func scriptChange(script *string, remove bool) (fibp.ScriptChange, string) {
	switch {
	case remove:
		return fibp.ScriptChangeRemove, ""
	case script != nil:
		return fibp.ScriptChangeSet, *script
	}
	return fibp.ScriptChangeUnchanged, ""
}

func opt[T any](p *T) wire.Optional[T] {
	if p == nil {
		return wire.Optional[T]{}
	}
	return wire.Some(*p)
}

func optDuration(p *time.Duration) wire.Optional[uint64] {
	if p == nil {
		return wire.Optional[uint64]{}
	}
	return wire.Some(durationMs(*p))
}

// DeleteQueue deletes a queue and its dead-letter queue.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	res, err := roundTrip[fibp.DeleteQueueResult](ctx, c, &fibp.DeleteQueue{Queue: name})
	if err != nil {
		return err
	}
	return resultError(res.ErrorCode, queueSubject(name))
}

// QueueStats is every field of GetStatsResult.
type QueueStats struct {
	Depth                uint64            `json:"depth"`
	InFlight             uint64            `json:"in_flight"`
	Delayed              uint64            `json:"delayed"`
	Unclassified         uint64            `json:"unclassified"`
	OldestUnclassifiedAt time.Time         `json:"oldest_unclassified_at,omitzero"` // zero if none
	Throttled            uint64            `json:"throttled"`
	ActiveFairnessKeys   uint64            `json:"active_fairness_keys"`
	ActiveConsumers      uint32            `json:"active_consumers"`
	Quantum              uint32            `json:"quantum"`
	LeaderNodeID         uint64            `json:"leader_node_id"`
	ReplicationCount     uint32            `json:"replication_count"`
	PerKeyStats          []FairnessKeyStat `json:"per_key_stats"`
	ActiveThrottles      []ThrottleSummary `json:"active_throttles"`
	// Settings are the queue's stored settings by CreateQueue field name; a zero number or
	// backoff server_default follows the broker default defaults.<name> (see ListConfig).
	Settings map[string]string `json:"settings,omitempty"`
	// OrderingGroups counts the ordering groups with messages, OrderingGroupsBlocked those whose
	// head is in flight (nothing else of the group is delivered meanwhile); 0 when unordered.
	OrderingGroups        uint64 `json:"ordering_groups"`
	OrderingGroupsBlocked uint64 `json:"ordering_groups_blocked"`
}

// FairnessKeyStat is the scheduler's state for one fairness key.
type FairnessKeyStat struct {
	Key            string `json:"key"`
	PendingCount   uint64 `json:"pending_count"`
	CurrentDeficit int64  `json:"current_deficit"`
	Weight         uint32 `json:"weight"`
}

// ThrottleSummary describes a throttle active on a queue, or the throttle of GetThrottleStats.
type ThrottleSummary struct {
	Name                 string          `json:"name"`
	Limits               []ThrottleLimit `json:"limits"`
	Key                  Key             `json:"key"`
	WhenKeyMissing       WhenKeyMissing  `json:"when_key_missing"`
	DeclaringSubscribers uint32          `json:"declaring_subscribers"`
}

func throttleSummary(t *fibp.ThrottleSummary) ThrottleSummary {
	return ThrottleSummary{
		Name:                 t.Name,
		Limits:               throttleLimits(t.Limits),
		Key:                  t.Key,
		WhenKeyMissing:       t.WhenKeyMissing,
		DeclaringSubscribers: t.DeclaringSubscribers,
	}
}

// GetStats returns a queue's live statistics.
func (c *Client) GetStats(ctx context.Context, queue string) (*QueueStats, error) {
	res, err := roundTrip[fibp.GetStatsResult](ctx, c, &fibp.GetStats{Queue: queue})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, queueSubject(queue)); err != nil {
		return nil, err
	}
	st := &QueueStats{
		Depth:                 res.Depth,
		InFlight:              res.InFlight,
		Delayed:               res.Delayed,
		Unclassified:          res.Unclassified,
		OldestUnclassifiedAt:  msTime(res.OldestUnclassifiedAt),
		Throttled:             res.Throttled,
		ActiveFairnessKeys:    res.ActiveFairnessKeys,
		ActiveConsumers:       res.ActiveConsumers,
		Quantum:               res.Quantum,
		LeaderNodeID:          res.LeaderNodeID,
		ReplicationCount:      res.ReplicationCount,
		PerKeyStats:           make([]FairnessKeyStat, len(res.PerKeyStats)),
		ActiveThrottles:       make([]ThrottleSummary, len(res.ActiveThrottles)),
		Settings:              res.Settings,
		OrderingGroups:        res.OrderingGroups,
		OrderingGroupsBlocked: res.OrderingGroupsBlocked,
	}
	for i, k := range res.PerKeyStats {
		st.PerKeyStats[i] = FairnessKeyStat(k)
	}
	for i := range res.ActiveThrottles {
		st.ActiveThrottles[i] = throttleSummary(&res.ActiveThrottles[i])
	}
	return st, nil
}

// QueueList is the answer to ListQueues.
type QueueList struct {
	ClusterNodeCount uint32      `json:"cluster_node_count"` // 0 if single-node
	Queues           []QueueInfo `json:"queues"`
}

// QueueInfo summarizes one queue.
type QueueInfo struct {
	Name            string `json:"name"`
	Depth           uint64 `json:"depth"`
	InFlight        uint64 `json:"in_flight"`
	ActiveConsumers uint32 `json:"active_consumers"`
	LeaderNodeID    uint64 `json:"leader_node_id"`
}

// ListQueues lists every queue.
func (c *Client) ListQueues(ctx context.Context) (*QueueList, error) {
	res, err := roundTrip[fibp.ListQueuesResult](ctx, c, &fibp.ListQueues{})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, "list queues"); err != nil {
		return nil, err
	}
	l := &QueueList{ClusterNodeCount: res.ClusterNodeCount, Queues: make([]QueueInfo, len(res.Queues))}
	for i, q := range res.Queues {
		l.Queues[i] = QueueInfo(q)
	}
	return l, nil
}

// SetConfig sets a runtime config key.
func (c *Client) SetConfig(ctx context.Context, key, value string) error {
	res, err := roundTrip[fibp.SetConfigResult](ctx, c, &fibp.SetConfig{Key: key, Value: value})
	if err != nil {
		return err
	}
	return resultError(res.ErrorCode, "config key "+strconv.Quote(key))
}

// GetConfig reads a runtime config key; an unset key is ErrInvalidConfigValue.
func (c *Client) GetConfig(ctx context.Context, key string) (string, error) {
	res, err := roundTrip[fibp.GetConfigResult](ctx, c, &fibp.GetConfig{Key: key})
	if err != nil {
		return "", err
	}
	if res.ErrorCode == fibp.CodeInvalidConfigValue {
		return "", &Error{Code: res.ErrorCode, Message: "config key " + strconv.Quote(key) + " is not set"}
	}
	if err := resultError(res.ErrorCode, "config key "+strconv.Quote(key)); err != nil {
		return "", err
	}
	return res.Value, nil
}

// ConfigEntry is one runtime config key and its value.
type ConfigEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ListConfig lists the config entries whose keys start with prefix ("" = all).
func (c *Client) ListConfig(ctx context.Context, prefix string) ([]ConfigEntry, error) {
	res, err := roundTrip[fibp.ListConfigResult](ctx, c, &fibp.ListConfig{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, "list config"); err != nil {
		return nil, err
	}
	out := make([]ConfigEntry, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = ConfigEntry(e)
	}
	return out, nil
}

// RedriveResult reports what a Redrive moved and what stayed in the DLQ.
type RedriveResult struct {
	Redriven         uint64 `json:"redriven"`
	LeftUnclassified uint64 `json:"left_unclassified"`
	RejectedByScript uint64 `json:"rejected_by_script"`
}

// Redrive moves up to count (0 = all) messages of a dead-letter queue back to its parent.
func (c *Client) Redrive(ctx context.Context, dlq string, count uint64, reclassify Reclassify) (*RedriveResult, error) {
	res, err := roundTrip[fibp.RedriveResult](ctx, c, &fibp.Redrive{DLQQueue: dlq, Count: count, Reclassify: reclassify})
	if err != nil {
		return nil, err
	}
	if err := resultError(res.ErrorCode, queueSubject(dlq)); err != nil {
		return nil, err
	}
	return &RedriveResult{Redriven: res.Redriven, LeftUnclassified: res.LeftUnclassified, RejectedByScript: res.RejectedByScript}, nil
}
