package fila

import "github.com/filamq/fila/generated/fibp"

// The SDK's names for the protocol's enumerations, so that an application needs no import of
// the generated codecs. Each is an alias of the generated type: values convert freely, and
// String and MarshalText render them by the spec's names.

// Ordering is a queue's ordering mode, fixed at creation (QueueConfig.Ordering).
type Ordering = fibp.Ordering

const (
	OrderingNone    Ordering = fibp.OrderingNone    // no order promised (the default)
	OrderingQueue   Ordering = fibp.OrderingQueue   // the whole queue is one ordering group
	OrderingGrouped Ordering = fibp.OrderingGrouped // one group per value of QueueConfig.OrderingKey
)

// WhenOrderingKeyMissing says what a grouped queue does with a message whose ordering key cannot
// be evaluated.
type WhenOrderingKeyMissing = fibp.WhenOrderingKeyMissing

const (
	WhenOrderingKeyMissingReject    WhenOrderingKeyMissing = fibp.WhenOrderingKeyMissingReject    // refuse it (ErrOrderingKeyMissing)
	WhenOrderingKeyMissingUnordered WhenOrderingKeyMissing = fibp.WhenOrderingKeyMissingUnordered // enqueue it in no group
)

// ScriptFailure says what a queue does when its on_enqueue script fails on a message; fixed at
// creation.
type ScriptFailure = fibp.ScriptFailure

const (
	ScriptFailureReject ScriptFailure = fibp.ScriptFailureReject // the message is refused (ErrScriptError, ErrScriptTimeout)
	ScriptFailurePark   ScriptFailure = fibp.ScriptFailurePark   // it is stored unclassified until a redrive
)

// Backoff is a queue's retry backoff policy.
type Backoff = fibp.Backoff

const (
	BackoffServerDefault Backoff = fibp.BackoffServerDefault // the broker's defaults.backoff
	BackoffNone          Backoff = fibp.BackoffNone          // retry at once
	BackoffFixed         Backoff = fibp.BackoffFixed         // retry after BackoffInitial
	BackoffExponential   Backoff = fibp.BackoffExponential   // BackoffInitial doubling up to BackoffMax
)

// DeliveryDurability says how a queue's leases survive a leader change.
type DeliveryDurability = fibp.DeliveryDurability

const (
	DeliveryDurabilityCommitted DeliveryDurability = fibp.DeliveryDurabilityCommitted // leases committed before delivery
	DeliveryDurabilityFast      DeliveryDurability = fibp.DeliveryDurabilityFast      // leases in the leader's memory only
)

// WhenKeyMissing says what a throttle does with a message whose throttle key cannot be
// evaluated (Throttle.WhenKeyMissing).
type WhenKeyMissing = fibp.WhenKeyMissing

const (
	WhenKeyMissingSharedBucket WhenKeyMissing = fibp.WhenKeyMissingSharedBucket // such messages share one bucket (the default)
	WhenKeyMissingUnthrottled  WhenKeyMissing = fibp.WhenKeyMissingUnthrottled  // such messages pass unthrottled
)

// Reclassify says which redriven messages run the queue's on_enqueue script again (Redrive).
type Reclassify = fibp.Reclassify

const (
	ReclassifyAll              Reclassify = fibp.ReclassifyAll              // every message
	ReclassifyUnclassifiedOnly Reclassify = fibp.ReclassifyUnclassifiedOnly // those never classified
	ReclassifyNone             Reclassify = fibp.ReclassifyNone             // none: unclassified ones stay in the DLQ
)

// Code is a broker error code (Error.Code, ErrorCode). Compare it with a sentinel's, as in
// code == fila.ErrQueueNotFound.Code, or match errors with errors.Is and the sentinels.
type Code = fibp.ErrorCode

// Permission kinds (Permission.Kind) besides "throttle".
const (
	PermissionProduce = fibp.AclKindProduce // Enqueue to matching queues
	PermissionConsume = fibp.AclKindConsume // Consume, Ack, Nack and ExtendLease on matching queues
	PermissionAdmin   = fibp.AclKindAdmin   // queue administration and Redrive on matching queues
)

// PermissionThrottle is the permission kind for declaring and reading the throttles whose names
// match the pattern (Fila's addition to the spec's kinds).
const PermissionThrottle = "throttle"

// BucketKind names a throttle bucket in GetThrottleBucket.
type BucketKind = fibp.BucketKind

const (
	BucketKindKeyed            BucketKind = fibp.BucketKindKeyed            // a keyed bucket, or an unkeyed throttle's one
	BucketKindMissingKeyShared BucketKind = fibp.BucketKindMissingKeyShared // the shared bucket of messages missing the key
)

// RebalancingMode is the cluster's automatic leadership rebalancing state (SetRebalancing).
type RebalancingMode = fibp.RebalancingMode

const (
	RebalancingEnabled  RebalancingMode = fibp.RebalancingEnabled
	RebalancingPaused   RebalancingMode = fibp.RebalancingPaused
	RebalancingDisabled RebalancingMode = fibp.RebalancingDisabled
)

// NodeState is a cluster node's state in GetClusterStatus.
type NodeState = fibp.NodeState

const (
	NodeStateUp          NodeState = fibp.NodeStateUp
	NodeStateUnreachable NodeState = fibp.NodeStateUnreachable
	NodeStateDraining    NodeState = fibp.NodeStateDraining
)

// Capabilities is a set of protocol capabilities (Client.Capabilities).
type Capabilities = fibp.Capabilities

// CapCreditFlowControl: the server honours Consume credit (ConsumeOptions.MaxUnacked).
const CapCreditFlowControl Capabilities = fibp.CapCreditFlowControl

// The answers of the throttle and routing admin calls, as the protocol defines them.
type (
	ThrottleStats = fibp.GetThrottleStatsResult // GetThrottleStats
	BucketStats   = fibp.BucketStats            // GetThrottleBucket, and ThrottleStats.TopBuckets
	RouteEntry    = fibp.RouteEntry             // GetRoutes
	ShardRoute    = fibp.ShardRoute             // GetRoutes: a sharded queue's shard and its leader
)
