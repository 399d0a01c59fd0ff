package broker

import (
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
)

// Definition returns a queue's stored definition (for a dead-letter queue, its own), as
// CreateQueue and UpdateQueue left it: zero settings follow the broker defaults.
func (b *Broker) Definition(queue string) (QueueDefinition, *Error) {
	r := b.lookup(queue)
	if r.a == nil {
		return QueueDefinition{}, errorf(CodeQueueNotFound, "queue %q does not exist", queue)
	}
	var def store.QueueRecord
	read := func(a *actor) { def = a.lanes[r.lane].def }
	if !r.a.asleep(func(*summary) { read(r.a) }) && !r.a.read(read) {
		return QueueDefinition{}, errorf(CodeQueueNotFound, "queue %q was deleted", queue)
	}
	return definition(&def)
}

// definition is the domain's view of a stored definition. Its keys were decoded when the queue
// opened, so they decode here too.
func definition(def *store.QueueRecord) (QueueDefinition, *Error) {
	ok, err := keys.Decode(def.OrderingKey)
	if err != nil {
		return QueueDefinition{}, errorf(CodeInternalError, "queue %q: ordering key: %v", def.Name, err)
	}
	dk, err := keys.Decode(def.DedupKey)
	if err != nil {
		return QueueDefinition{}, errorf(CodeInternalError, "queue %q: dedup key: %v", def.Name, err)
	}
	return QueueDefinition{QueueSpec: QueueSpec{
		Name:            def.Name,
		OnEnqueueScript: def.OnEnqueueScript, HasOnEnqueue: def.OnEnqueueScript != "",
		OnFailureScript: def.OnFailureScript, HasOnFailure: def.OnFailureScript != "",
		VisibilityTimeoutMs:    def.VisibilityTimeoutMs,
		Ordering:               service.Ordering(def.Ordering),
		OrderingKey:            ok,
		WhenOrderingKeyMissing: service.WhenOrderingKeyMissing(def.WhenOrderingKeyMissing),
		DedupKey:               dk,
		DedupWindowMs:          def.DedupWindowMs,
		ScriptFailure:          service.ScriptFailure(def.ScriptFailure),
		ParkDeadLetterAfter:    def.ParkDeadLetterAfter,
		MaxAttempts:            def.MaxAttempts,
		Backoff:                service.Backoff(def.Backoff),
		BackoffInitialMs:       def.BackoffInitialMs,
		BackoffMaxMs:           def.BackoffMaxMs,
		DeliveryDurability:     service.DeliveryDurability(def.DeliveryDurability),
		ReclaimGraceMs:         def.ReclaimGraceMs,
		Shards:                 def.Shards,
	}, DLQOf: def.DLQOf}, nil
}
