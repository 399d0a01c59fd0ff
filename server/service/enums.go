package service

import "fmt"

// The domain's enumerations. Their values are the protocol's (FIBP) and the store's numbering, so
// a mapping between them is a conversion that the session's tests check name by name; an
// implementation checks the range of what it is given (Known), since an edge passes values it
// does not know through, for the refusal to name them.

// Ordering is a queue's delivery order (ordering.md); fixed at creation.
type Ordering uint8

const (
	OrderingNone    Ordering = 0 // no order: fair scheduling only
	OrderingQueue   Ordering = 1 // the whole queue in enqueue order
	OrderingGrouped Ordering = 2 // in order within each group of the ordering key
)

func (v Ordering) String() string {
	return name(uint8(v), "Ordering", "none", "queue", "grouped")
}

// Known reports whether v is one of the values above.
func (v Ordering) Known() bool { return v <= OrderingGrouped }

// WhenOrderingKeyMissing says what a grouped queue does with a message without the ordering key.
type WhenOrderingKeyMissing uint8

const (
	WhenOrderingKeyMissingReject    WhenOrderingKeyMissing = 0 // refuse it (CodeOrderingKeyMissing)
	WhenOrderingKeyMissingUnordered WhenOrderingKeyMissing = 1 // take it, outside every group
)

func (v WhenOrderingKeyMissing) String() string {
	return name(uint8(v), "WhenOrderingKeyMissing", "reject", "unordered")
}

// Known reports whether v is one of the values above.
func (v WhenOrderingKeyMissing) Known() bool { return v <= WhenOrderingKeyMissingUnordered }

// ScriptFailure says what happens to a message whose on_enqueue script fails.
type ScriptFailure uint8

const (
	ScriptFailureReject ScriptFailure = 0 // the message is refused (CodeScriptError, CodeScriptTimeout)
	ScriptFailurePark   ScriptFailure = 1 // the message is kept unclassified and classified later
)

func (v ScriptFailure) String() string { return name(uint8(v), "ScriptFailure", "reject", "park") }

// Known reports whether v is one of the values above.
func (v ScriptFailure) Known() bool { return v <= ScriptFailurePark }

// Backoff is a queue's retry backoff policy (concepts.md, "Retry policy").
type Backoff uint8

const (
	BackoffServerDefault Backoff = 0 // the broker default (defaults.backoff)
	BackoffNone          Backoff = 1 // retry at once
	BackoffFixed         Backoff = 2 // retry after the initial delay
	BackoffExponential   Backoff = 3 // double the delay at each attempt, up to the maximum
)

func (v Backoff) String() string {
	return name(uint8(v), "Backoff", "server_default", "none", "fixed", "exponential")
}

// Known reports whether v is one of the values above.
func (v Backoff) Known() bool { return v <= BackoffExponential }

// DeliveryDurability says whether a lease is durable before its delivery is sent.
type DeliveryDurability uint8

const (
	DeliveryDurabilityCommitted DeliveryDurability = 0 // deliveries wait for their lease's commit
	DeliveryDurabilityFast      DeliveryDurability = 1 // deliveries go out before it
)

func (v DeliveryDurability) String() string {
	return name(uint8(v), "DeliveryDurability", "committed", "fast")
}

// Known reports whether v is one of the values above.
func (v DeliveryDurability) Known() bool { return v <= DeliveryDurabilityFast }

// ScriptChange is what an UpdateQueue does to one of a queue's scripts.
type ScriptChange uint8

const (
	ScriptUnchanged ScriptChange = 0
	ScriptSet       ScriptChange = 1 // to the update's script
	ScriptRemove    ScriptChange = 2
)

func (v ScriptChange) String() string {
	return name(uint8(v), "ScriptChange", "unchanged", "set", "remove")
}

// Known reports whether v is one of the values above.
func (v ScriptChange) Known() bool { return v <= ScriptRemove }

// Reclassify says which messages a Redrive runs on_enqueue on again.
type Reclassify uint8

const (
	ReclassifyAll              Reclassify = 0 // every message
	ReclassifyUnclassifiedOnly Reclassify = 1 // only messages that were never classified
	ReclassifyNone             Reclassify = 2 // none (the largest valid value)
)

func (v Reclassify) String() string {
	return name(uint8(v), "Reclassify", "all", "unclassified_only", "none")
}

// Known reports whether v is one of the values above.
func (v Reclassify) Known() bool { return v <= ReclassifyNone }

// RebalancingMode is the cluster's rebalancing state.
type RebalancingMode uint8

const (
	RebalancingEnabled  RebalancingMode = 0
	RebalancingPaused   RebalancingMode = 1 // until ClusterStatus.PauseEndsAt
	RebalancingDisabled RebalancingMode = 2
)

func (v RebalancingMode) String() string {
	return name(uint8(v), "RebalancingMode", "enabled", "paused", "disabled")
}

// Known reports whether v is one of the values above.
func (v RebalancingMode) Known() bool { return v <= RebalancingDisabled }

// name is names[v], or "Type(0x..)" for an unknown value (as the generated enums print one).
func name(v uint8, typ string, names ...string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%#x)", typ, v)
}
