package broker

import (
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
)

// The admin operations' domain types. Enumerations keep the protocol's numbering (the session
// passes the values through; the broker validates their range), so that a stored definition reads
// the same whoever wrote it.

// Enumeration values the broker understands.
const (
	ScriptUnchanged            uint8 = 0
	ScriptSet                  uint8 = 1
	ScriptRemove               uint8 = 2
	ReclassifyAll              uint8 = 0 // Redrive runs on_enqueue again for every message
	ReclassifyUnclassifiedOnly uint8 = 1 // only for messages that were never classified
	ReclassifyNone             uint8 = 2 // for none (the largest valid value)
)

// QueueSpec is the definition of a new queue. Zero settings follow the broker defaults.
type QueueSpec struct {
	Name string
	// OnEnqueueScript and OnFailureScript are the Lua hooks, used when HasOnEnqueue and
	// HasOnFailure (a present but empty script is refused: it defines no hook function).
	OnEnqueueScript, OnFailureScript string
	HasOnEnqueue, HasOnFailure       bool
	VisibilityTimeoutMs              uint64
	// Ordering is store.OrderingNone, OrderingQueue or OrderingGrouped (by OrderingKey, with
	// WhenOrderingKeyMissing deciding about messages without it); fixed at creation.
	Ordering               store.Ordering
	OrderingKey            keys.Key
	WhenOrderingKeyMissing store.WhenOrderingKeyMissing
	// DedupKey is the deduplication identity (empty: the producer's idempotency key); fixed at
	// creation.
	DedupKey                       keys.Key
	DedupWindowMs                  uint64
	ScriptFailure                  store.ScriptFailure
	ParkDeadLetterAfter            uint32
	MaxAttempts                    uint32
	Backoff                        engine.Backoff
	BackoffInitialMs, BackoffMaxMs uint64
	DeliveryDurability             store.DeliveryDurability
	ReclaimGraceMs                 uint64
}

// QueueUpdate changes a queue's mutable settings: nil fields stay as they are.
type QueueUpdate struct {
	Queue string
	// OnEnqueueChange and OnFailureChange are ScriptUnchanged, ScriptSet (to OnEnqueueScript,
	// OnFailureScript) or ScriptRemove.
	OnEnqueueChange, OnFailureChange uint8
	OnEnqueueScript, OnFailureScript string
	VisibilityTimeoutMs              *uint64
	DedupWindowMs                    *uint64
	MaxAttempts                      *uint32
	Backoff                          *engine.Backoff
	BackoffInitialMs, BackoffMaxMs   *uint64
	ParkDeadLetterAfter              *uint32
	DeliveryDurability               *store.DeliveryDurability
	ReclaimGraceMs                   *uint64
}

// QueueStats are a queue's live counters, as GetStats reports them.
type QueueStats struct {
	engine.Stats // Throttled counts the messages held only by a throttle
	// Throttles are the throttles declared by the queue's live subscriptions, by name;
	// Subscribers counts this queue's.
	Throttles []ThrottleSummary
}

// QueueSummary is one queue of ListQueues.
type QueueSummary struct {
	Name            string
	Depth, InFlight uint64
	ActiveConsumers uint32
}

// ConfigEntry is one runtime config entry.
type ConfigEntry struct{ Key, Value string }

// RebalancingMode is the cluster's rebalancing state.
type RebalancingMode uint8

const (
	RebalancingEnabled RebalancingMode = iota
	RebalancingPaused
	RebalancingDisabled
)

// ClusterStatus describes the cluster (a single node: this one, leading every queue).
type ClusterStatus struct {
	Rebalancing      RebalancingMode
	PauseEndsAt      uint64 // Unix ms, when Rebalancing is RebalancingPaused
	QueueLeaderships uint32 // queues this node leads
}
