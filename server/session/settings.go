package session

import (
	"strconv"
	"strings"

	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
)

// Settings renders a queue's definition as GetStatsResult.settings: CreateQueue's field
// names, numbers in decimal, enumerations by their spec names, keys as their parts (header:customer), scripts as their source. A zero
// number or backoff "default" means the queue follows the broker default of the same name
// (defaults.<name>).
func Settings(def *service.QueueDefinition) map[string]string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	m := map[string]string{
		"visibility_timeout_ms":     u(def.VisibilityTimeoutMs),
		"max_attempts":              u(uint64(def.MaxAttempts)),
		"backoff":                   def.Backoff.String(),
		"backoff_initial_ms":        u(def.BackoffInitialMs),
		"backoff_max_ms":            u(def.BackoffMaxMs),
		"dedup_window_ms":           u(def.DedupWindowMs),
		"delivery_durability":       def.DeliveryDurability.String(),
		"reclaim_grace_ms":          u(def.ReclaimGraceMs),
		"ordering":                  def.Ordering.String(),
		"when_ordering_key_missing": def.WhenOrderingKeyMissing.String(),
		"script_failure":            def.ScriptFailure.String(),
		"park_dead_letter_after":    u(uint64(def.ParkDeadLetterAfter)),
		"on_enqueue_script":         def.OnEnqueueScript,
		"on_failure_script":         def.OnFailureScript,
	}
	m["ordering_key"], m["dedup_key"] = formatKey(def.OrderingKey), formatKey(def.DedupKey)
	if def.DLQOf != "" {
		m["dlq_of"] = def.DLQOf
	}
	if def.Shards > 1 {
		m["shards"] = u(uint64(def.Shards)) // a sharded queue's (docs/sharding.md)
	}
	return m
}

// formatKey renders a key as its parts joined by commas (header:customer,fairness_key); empty
// for no key.
func formatKey(k keys.Key) string {
	parts := make([]string, len(k))
	for i, p := range k {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}
