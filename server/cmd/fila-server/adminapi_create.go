package main

import (
	"net/http"
	"strings"

	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
)

// Queue creation, for keys with admin on the queue, with what FIBP's CreateQueue cannot carry: a
// shard count (docs/sharding.md).
//
//	POST /api/v1/queues  {"name": "orders", "shards": 4, ...settings} → {"queue", "shards"}
//
// The settings are CreateQueue's, named as its fields, the enumerations by name (ordering none,
// queue or grouped; when_ordering_key_missing reject or unordered; backoff default, none, fixed
// or exponential; delivery_durability committed or fast; script_failure reject or park) and the
// keys as `fila` writes them (header:NAME, attr:NAME, fairness_key, idempotency_key,
// payload_hash, headers_hash, comma-separated). shards is 1 (not sharded; the default) to 64.
// Refusals: 400 (a bad value: the broker's code, such as InvalidConfigValue, or invalid), 409
// QueueAlreadyExists, 403 without admin on the queue.

type createQueueRequest struct {
	Name                   string  `json:"name"`
	Shards                 *uint32 `json:"shards"`
	Ordering               string  `json:"ordering"`
	OrderingKey            string  `json:"ordering_key"`
	WhenOrderingKeyMissing string  `json:"when_ordering_key_missing"`
	DedupKey               string  `json:"dedup_key"`
	DedupWindowMs          uint64  `json:"dedup_window_ms"`
	VisibilityTimeoutMs    uint64  `json:"visibility_timeout_ms"`
	MaxAttempts            uint32  `json:"max_attempts"`
	ParkDeadLetterAfter    uint32  `json:"park_dead_letter_after"`
	Backoff                string  `json:"backoff"`
	BackoffInitialMs       uint64  `json:"backoff_initial_ms"`
	BackoffMaxMs           uint64  `json:"backoff_max_ms"`
	DeliveryDurability     string  `json:"delivery_durability"`
	ReclaimGraceMs         uint64  `json:"reclaim_grace_ms"`
	ScriptFailure          string  `json:"script_failure"`
	OnEnqueueScript        *string `json:"on_enqueue_script"`
	OnFailureScript        *string `json:"on_failure_script"`
}

func (api *adminAPI) createRoutes() {
	api.mux.HandleFunc("POST "+apiPath+"queues", untimedFunc(api.handle(createQueue)))
}

func createQueue(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	var req createQueueRequest
	if herr := readJSON(r, &req); herr != nil {
		return nil, herr
	}
	if herr := permitted(p, req.Name, auth.Admin); herr != nil {
		return nil, herr
	}
	spec, herr := req.spec()
	if herr != nil {
		return nil, herr
	}
	if e := b.CreateQueue(spec); e != nil {
		return nil, brokerRefusal(e)
	}
	return map[string]any{"queue": spec.Name, "shards": max(spec.Shards, 1)}, nil
}

// spec checks the request and makes it a CreateQueue.
func (req *createQueueRequest) spec() (service.QueueSpec, *httpError) {
	s := service.QueueSpec{Name: req.Name, DedupWindowMs: req.DedupWindowMs, VisibilityTimeoutMs: req.VisibilityTimeoutMs,
		MaxAttempts: req.MaxAttempts, ParkDeadLetterAfter: req.ParkDeadLetterAfter, BackoffInitialMs: req.BackoffInitialMs,
		BackoffMaxMs: req.BackoffMaxMs, ReclaimGraceMs: req.ReclaimGraceMs, Shards: 1}
	if req.Shards != nil {
		if *req.Shards < 1 || *req.Shards > shard.Max {
			return s, refuse(http.StatusBadRequest, "shards %d: a queue has 1 to %d shards", *req.Shards, shard.Max)
		}
		s.Shards = *req.Shards
	}
	if req.OnEnqueueScript != nil {
		s.OnEnqueueScript, s.HasOnEnqueue = *req.OnEnqueueScript, true
	}
	if req.OnFailureScript != nil {
		s.OnFailureScript, s.HasOnFailure = *req.OnFailureScript, true
	}
	var herr *httpError
	pick := func(field, v string, names ...string) uint8 {
		if herr != nil || v == "" {
			return 0
		}
		for i, n := range names {
			if v == n {
				return uint8(i)
			}
		}
		herr = refuse(http.StatusBadRequest, "%s %q: want one of %s", field, v, strings.Join(names, ", "))
		return 0
	}
	s.Ordering = service.Ordering(pick("ordering", req.Ordering, "none", "queue", "grouped"))
	s.WhenOrderingKeyMissing = service.WhenOrderingKeyMissing(pick("when_ordering_key_missing", req.WhenOrderingKeyMissing, "reject", "unordered"))
	s.Backoff = service.Backoff(pick("backoff", req.Backoff, "default", "none", "fixed", "exponential"))
	s.DeliveryDurability = service.DeliveryDurability(pick("delivery_durability", req.DeliveryDurability, "committed", "fast"))
	s.ScriptFailure = service.ScriptFailure(pick("script_failure", req.ScriptFailure, "reject", "park"))
	if herr != nil {
		return s, herr
	}
	if s.OrderingKey, herr = parseKey("ordering_key", req.OrderingKey); herr != nil {
		return s, herr
	}
	s.DedupKey, herr = parseKey("dedup_key", req.DedupKey)
	return s, herr
}

// parseKey reads a key as `fila` writes it (client/fila ParseKey's form).
func parseKey(field, s string) (keys.Key, *httpError) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var k keys.Key
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		kind, name, named := strings.Cut(part, ":")
		switch {
		case kind == "header" && named && name != "":
			k = append(k, keys.Part{Kind: keys.Header, Name: name})
		case kind == "attr" && named && name != "":
			k = append(k, keys.Part{Kind: keys.Attribute, Name: name})
		case part == "fairness_key":
			k = append(k, keys.Part{Kind: keys.FairnessKey})
		case part == "idempotency_key":
			k = append(k, keys.Part{Kind: keys.IdempotencyKey})
		case part == "payload_hash":
			k = append(k, keys.Part{Kind: keys.PayloadHash})
		case part == "headers_hash":
			k = append(k, keys.Part{Kind: keys.HeadersHash})
		default:
			return nil, refuse(http.StatusBadRequest, "%s: bad key part %q (want header:NAME, attr:NAME, fairness_key, idempotency_key, payload_hash or headers_hash)", field, part)
		}
	}
	return k, nil
}
