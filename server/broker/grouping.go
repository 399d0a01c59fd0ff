package broker

import (
	"fmt"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
)

// laneKeys are a lane's ordering and deduplication settings (ordering.md, deduplication.md),
// parsed once from its definition. They are fixed at creation, so they never change under a
// live lane.
type laneKeys struct {
	ordering    store.Ordering
	orderingKey keys.Key // store.OrderingGrouped only
	unordered   bool     // a message missing the ordering key is enqueued unordered (else rejected)
	dedupKey    keys.Key // empty: the producer's idempotency key is the identity
}

// parseLaneKeys reads the keys of a stored definition.
func parseLaneKeys(def *store.QueueRecord) (laneKeys, error) {
	ok, err := keys.Decode(def.OrderingKey)
	if err != nil {
		return laneKeys{}, fmt.Errorf("ordering key: %w", err)
	}
	dk, err := keys.Decode(def.DedupKey)
	if err != nil {
		return laneKeys{}, fmt.Errorf("dedup key: %w", err)
	}
	return laneKeys{ordering: def.Ordering, orderingKey: ok, dedupKey: dk,
		unordered: def.WhenOrderingKeyMissing == store.WhenOrderingKeyMissingUnordered}, nil
}

// group decides the ordering group of a message described by s: grouped is false for an
// unordered message; ok is false when the queue rejects it (its ordering key is missing).
func (k *laneKeys) group(s *keys.Subject) (group string, grouped, ok bool) {
	switch k.ordering {
	case store.OrderingQueue:
		return "", true, true
	case store.OrderingGrouped:
		g, has := k.orderingKey.Group(s)
		if !has {
			return "", false, k.unordered
		}
		return g, true, true
	}
	return "", false, true
}

// identity is a message's deduplication identity: the queue's dedup key evaluated on it, or
// without one the producer's idempotency key; ok is false when it has none.
func (k *laneKeys) identity(s *keys.Subject) (keys.Identity, bool) {
	if len(k.dedupKey) > 0 {
		return k.dedupKey.Identity(s)
	}
	if !s.HasIdempotencyKey {
		return keys.Identity{}, false
	}
	return keys.IdempotencyIdentity(s.IdempotencyKey), true
}

// checkKeys validates a CreateQueue's ordering and deduplication settings.
func checkKeys(req *QueueSpec) *Error {
	switch {
	case !req.Ordering.Known():
		return errorf(CodeInvalidConfigValue, "ordering %d is not 0 (none), 1 (whole queue) or 2 (grouped)", req.Ordering)
	case req.Ordering == service.OrderingGrouped && len(req.OrderingKey) == 0:
		return errorf(CodeInvalidConfigValue, "ordering 2 (grouped) needs an ordering key")
	case req.Ordering != service.OrderingGrouped && len(req.OrderingKey) > 0:
		return errorf(CodeInvalidConfigValue, "an ordering key needs ordering 2 (grouped), not %d", req.Ordering)
	}
	if err := req.OrderingKey.Check(keys.Ordering); err != nil {
		return errorf(CodeInvalidConfigValue, "%v", err)
	}
	if err := req.DedupKey.Check(keys.Dedup); err != nil {
		return errorf(CodeInvalidConfigValue, "%v", err)
	}
	return nil
}
