package service

import (
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/throttle"
)

// The admin operations' domain types.

// QueueSpec is the definition of a new queue. Zero settings follow the broker defaults.
type QueueSpec struct {
	Name string
	// OnEnqueueScript and OnFailureScript are the Lua hooks, used when HasOnEnqueue and
	// HasOnFailure (a present but empty script is refused: it defines no hook function).
	OnEnqueueScript, OnFailureScript string
	HasOnEnqueue, HasOnFailure       bool
	VisibilityTimeoutMs              uint64
	// Ordering is OrderingNone, OrderingQueue or OrderingGrouped (by OrderingKey, with
	// WhenOrderingKeyMissing deciding about messages without it); fixed at creation.
	Ordering               Ordering
	OrderingKey            keys.Key
	WhenOrderingKeyMissing WhenOrderingKeyMissing
	// DedupKey is the deduplication identity (empty: the producer's idempotency key); fixed at
	// creation.
	DedupKey                       keys.Key
	DedupWindowMs                  uint64
	ScriptFailure                  ScriptFailure
	ParkDeadLetterAfter            uint32
	MaxAttempts                    uint32
	Backoff                        Backoff
	BackoffInitialMs, BackoffMaxMs uint64
	DeliveryDurability             DeliveryDurability
	ReclaimGraceMs                 uint64
	// Shards splits the queue into that many shards, each a queue group of its own (0 or 1: not
	// sharded; at most 64); fixed at creation. FIBP's CreateQueue has no field for it: the admin
	// HTTP API's queue creation sets it (docs/sharding.md).
	Shards uint32
}

// QueueDefinition is a queue's definition as CreateQueue and UpdateQueue left it (for a
// dead-letter queue, its own): zero settings follow the broker defaults.
type QueueDefinition struct {
	QueueSpec
	DLQOf string // the queue a dead-letter queue belongs to; empty for any other
}

// QueueUpdate changes a queue's mutable settings: nil fields stay as they are.
type QueueUpdate struct {
	Queue string
	// OnEnqueueChange and OnFailureChange set a script (to OnEnqueueScript, OnFailureScript),
	// remove it or leave it.
	OnEnqueueChange, OnFailureChange ScriptChange
	OnEnqueueScript, OnFailureScript string
	VisibilityTimeoutMs              *uint64
	DedupWindowMs                    *uint64
	MaxAttempts                      *uint32
	Backoff                          *Backoff
	BackoffInitialMs, BackoffMaxMs   *uint64
	ParkDeadLetterAfter              *uint32
	DeliveryDurability               *DeliveryDurability
	ReclaimGraceMs                   *uint64
}

// QueueStats are a queue's live counters, as GetStats reports them.
type QueueStats struct {
	// Depth counts stored messages that are not leased: ready, held, delayed and waiting for a
	// retry.
	Depth uint64
	// InFlight counts leased messages.
	InFlight uint64
	// Delayed counts messages not yet eligible for delivery (enqueue delay or retry delay).
	Delayed uint64
	// Held counts ready messages kept from delivery by a hold.
	Held uint64
	// Throttled counts ready messages held only by a throttle.
	Throttled uint64
	// Unclassified counts parked unclassified messages; OldestUnclassifiedAt is the acceptance
	// time of the oldest (Unix ms; 0 when none is parked).
	Unclassified         uint64
	OldestUnclassifiedAt int64
	// ActiveFairnessKeys counts fairness keys with ready messages: the DRR round.
	ActiveFairnessKeys uint64
	// ActiveConsumers counts subscriptions.
	ActiveConsumers uint32
	// Quantum is the DRR quantum.
	Quantum uint32
	// OrderingGroups counts ordering groups with stored messages; BlockedGroups those whose head
	// is in flight.
	OrderingGroups, BlockedGroups uint64
	// Keys has one entry per fairness key with a stored message, sorted by key.
	Keys []KeyStats
	// Throttles are the throttles declared by the queue's live subscriptions, by name;
	// Subscribers counts this queue's.
	Throttles []ThrottleSummary
}

// KeyStats is the scheduler state of one fairness key.
type KeyStats struct {
	Key     string
	Pending uint64 // ready messages (not the held ones)
	Deficit int64  // the remaining DRR deficit in its current turn
	Weight  uint32 // the weight of the key's most recently enqueued message
}

// QueueSummary is one queue of ListQueues.
type QueueSummary struct {
	Name            string
	Depth, InFlight uint64
	ActiveConsumers uint32
}

// ConfigEntry is one runtime config entry.
type ConfigEntry struct{ Key, Value string }

// RedriveResult is the outcome of a Redrive.
type RedriveResult struct {
	Redriven uint64
	// LeftUnclassified stayed in the dead-letter queue: unclassified, and reclassify was none.
	LeftUnclassified uint64
	// RejectedByScript stayed in the dead-letter queue: on_enqueue failed on them and the queue
	// rejects script failures.
	RejectedByScript uint64
}

// ClusterStatus describes the cluster (a single node: this one, leading every queue).
type ClusterStatus struct {
	Rebalancing      RebalancingMode
	PauseEndsAt      uint64 // Unix ms, when Rebalancing is RebalancingPaused
	QueueLeaderships uint32 // queues this node leads
}

// APIKeyCreated is a new key: its secret is returned here once and never stored.
type APIKeyCreated struct {
	ID, Secret string
	Superadmin bool
}

// ThrottleSummary describes a throttle (GetStats, GetThrottleStats).
type ThrottleSummary = throttle.Summary

// ThrottleBucket is one bucket of a throttle as GetThrottleStats and GetThrottleBucket report it.
type ThrottleBucket struct {
	// Missing is the shared bucket of messages missing the key; otherwise Values has one value
	// per key part (none for an unkeyed throttle's bucket).
	Missing bool
	Values  []string
	// Counted has one count per effective limit, in the order of the summary's limits.
	Counted []uint64
	// Waiting counts the messages parked in this bucket, across queues.
	Waiting uint64
	// NextRoomAt is when one more delivery fits every limit (Unix ms); 0 when it fits now.
	NextRoomAt int64
}

// ThrottleStats is GetThrottleStats' answer: the throttle across every queue.
type ThrottleStats struct {
	Summary ThrottleSummary // Subscribers, Queues, ActiveBuckets and BucketsAtLimit set
	Waiting uint64          // messages held by this throttle, across queues
	Buckets []ThrottleBucket
}
