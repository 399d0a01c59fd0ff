package main

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

// A sharded queue is created through the broker's HTTP admin API (POST /api/v1/queues): FIBP's
// CreateQueue has no field for a shard count.

// maxShards is the largest shard count a queue may have (the broker's generated/shard Max).
const maxShards = 64

// createSharded creates cfg's queue with shards shards through the HTTP admin API at addr.
func (a *app) createSharded(cmd *cobra.Command, addr string, cfg fila.QueueConfig, shards uint32, names queueNames) error {
	req := map[string]any{
		"name": cfg.Name, "shards": shards, "ordering": names.ordering, "ordering_key": fila.FormatKey(cfg.OrderingKey),
		"when_ordering_key_missing": names.missing, "dedup_key": fila.FormatKey(cfg.DedupKey),
		"dedup_window_ms": cfg.DedupWindow.Milliseconds(), "visibility_timeout_ms": cfg.VisibilityTimeout.Milliseconds(),
		"max_attempts": cfg.MaxAttempts, "park_dead_letter_after": cfg.ParkDeadLetterAfter, "backoff": names.backoff,
		"backoff_initial_ms": cfg.BackoffInitial.Milliseconds(), "backoff_max_ms": cfg.BackoffMax.Milliseconds(),
		"delivery_durability": names.durability, "reclaim_grace_ms": cfg.ReclaimGrace.Milliseconds(),
		"script_failure": names.scriptFailure,
	}
	if cfg.OnEnqueueScript != "" {
		req["on_enqueue_script"] = cfg.OnEnqueueScript
	}
	if cfg.OnFailureScript != "" {
		req["on_failure_script"] = cfg.OnFailureScript
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var res struct {
		Queue  string `json:"queue"`
		Shards uint32 `json:"shards"`
	}
	if err := a.adminHTTPWith(context.WithoutCancel(cmd.Context()), addr, http.MethodPost, "/api/v1/queues", string(body), &res); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(map[string]any{"queue": res.Queue, "shards": res.Shards})
	}
	return a.printf("queue %q created with %d shards\n", res.Queue, res.Shards)
}

// queueNames are queue create's enumeration flags as given (the HTTP API takes the names).
type queueNames struct {
	ordering, missing, backoff, durability, scriptFailure string
}
