package broker

import (
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/service"
)

// The admin operations' domain types (server/service). Enumerations keep the protocol's
// numbering, so that a stored definition reads the same whoever wrote it; the broker validates
// their range.
type (
	QueueSpec       = service.QueueSpec
	QueueDefinition = service.QueueDefinition
	QueueUpdate     = service.QueueUpdate
	QueueStats      = service.QueueStats
	QueueSummary    = service.QueueSummary
	ConfigEntry     = service.ConfigEntry
	RedriveResult   = service.RedriveResult
	RebalancingMode = service.RebalancingMode
	Reclassify      = service.Reclassify
	ClusterStatus   = service.ClusterStatus
	APIKeyCreated   = service.APIKeyCreated
	ThrottleBucket  = service.ThrottleBucket
	ThrottleStats   = service.ThrottleStats
)

// Enumeration values the broker understands.
const (
	ScriptUnchanged            = service.ScriptUnchanged
	ScriptSet                  = service.ScriptSet
	ScriptRemove               = service.ScriptRemove
	ReclassifyAll              = service.ReclassifyAll              // Redrive runs on_enqueue again for every message
	ReclassifyUnclassifiedOnly = service.ReclassifyUnclassifiedOnly // only for messages that were never classified
	ReclassifyNone             = service.ReclassifyNone             // for none (the largest valid value)
	RebalancingEnabled         = service.RebalancingEnabled
	RebalancingPaused          = service.RebalancingPaused
	RebalancingDisabled        = service.RebalancingDisabled
)

// queueStats is GetStats' answer of a lane's engine counters and its throttles.
func queueStats(s *engine.Stats, throttles []ThrottleSummary) QueueStats {
	qs := QueueStats{Depth: s.Depth, InFlight: s.InFlight, Delayed: s.Delayed, Held: s.Held, Throttled: s.Throttled,
		Unclassified: s.Unclassified, OldestUnclassifiedAt: s.OldestUnclassifiedAt, ActiveFairnessKeys: s.ActiveFairnessKeys,
		ActiveConsumers: s.ActiveConsumers, Quantum: s.Quantum, OrderingGroups: s.OrderingGroups, BlockedGroups: s.BlockedGroups,
		Throttles: throttles}
	if len(s.Keys) > 0 {
		qs.Keys = make([]service.KeyStats, len(s.Keys))
		for i, k := range s.Keys {
			qs.Keys[i] = service.KeyStats{Key: k.Key, Pending: k.Pending, Deficit: k.Deficit, Weight: k.Weight}
		}
	}
	return qs
}
