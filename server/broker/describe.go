package broker

import "github.com/filamq/fila/generated/store"

// Definition returns a queue's stored definition (for a dead-letter queue, its own), as
// CreateQueue and UpdateQueue left it: zero settings follow the broker defaults.
func (b *Broker) Definition(queue string) (store.QueueRecord, *Error) {
	r := b.lookup(queue)
	if r.a == nil {
		return store.QueueRecord{}, errorf(CodeQueueNotFound, "queue %q does not exist", queue)
	}
	var def store.QueueRecord
	read := func(a *actor) { def = a.lanes[r.lane].def }
	if !r.a.asleep(func(*summary) { read(r.a) }) && !r.a.call(read) {
		return store.QueueRecord{}, errorf(CodeQueueNotFound, "queue %q was deleted", queue)
	}
	return def, nil
}
