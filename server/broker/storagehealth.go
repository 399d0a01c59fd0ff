package broker

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/storage"
)

// When a write to the store fails (a full disk, an I/O error, a read-only file system), the
// store refuses every write until the disk takes writes again (server/storage, guard.go). The
// broker meanwhile:
//
//   - answers every request that needs a write (Enqueue, Ack, Nack, ExtendLease, every admin
//     change) StorageError at once, before it reaches a queue;
//   - keeps serving what needs no write: stats, listings, and deliveries of queues with fast
//     delivery durability (their leases are not logged);
//   - stops the Raft group of each queue whose proposal failed (the actor is then suspended: it
//     answers from the state it holds, which may include the failed rounds, whose outcome is
//     unknown) and the meta group when its proposal failed, so that no Raft goroutine has to store
//     a term while writes fail (hashicorp/raft panics when it cannot);
//   - once the store accepts writes again, reopens each suspended group from its snapshot and
//     log (watchStorage), and the meta group on the next admin change.
//
// A store can also be stuck (storage Health.Stuck): a commit failed inside Pebble in a way no
// process but a new one gets past, and requests in flight there never return. StorageStuck tells
// the server, which exits so that its supervisor restarts it.

// StorageHealth returns nil while the store accepts writes, else why it does not (for /healthz).
func (b *Broker) StorageHealth() error { return b.db.Health().Err }

// StorageWriteFailures counts the writes that failed or were refused since the start.
func (b *Broker) StorageWriteFailures() int64 { return b.db.Health().Failures }

// writable answers StorageError while the store refuses writes.
func (b *Broker) writable() *Error {
	if err := b.db.Health().Err; err != nil {
		return errorf(CodeStorageError, "%v", err)
	}
	return nil
}

// StorageStuck is closed once the store is stuck: it refuses writes for good and cannot be
// closed (nor can the broker: Close would wait for the requests blocked in it); only a restart
// of the process opens the data directory again.
func (b *Broker) StorageStuck() <-chan struct{} { return b.storageStuck }

// watchStorage resumes the suspended queue groups each time the store accepts writes again, and
// closes storageStuck once the store is stuck.
func (b *Broker) watchStorage() {
	defer close(b.watchDone)
	for {
		h := b.db.Health()
		if h.Err == nil {
			b.resumeSuspended()
		}
		if h.Stuck {
			close(b.storageStuck)
			return
		}
		select {
		case <-h.Changed:
		case <-b.stopWatch:
			return
		}
	}
}

// resumeSuspended asks every actor to reopen its group if it is suspended.
func (b *Broker) resumeSuspended() {
	for _, a := range b.actors() {
		a.postAwake(func(a *actor) {
			if a.suspended {
				a.resume()
			}
		})
	}
}

// metaGroupForWrite returns the meta group, reopening it if a failed write stopped it. The
// caller holds adminMu.
func (b *Broker) metaGroupForWrite() (*raftgroup.Group, error) {
	if err := b.db.Health().Err; err != nil {
		return nil, err
	}
	if g := b.metaGroupNow(); g != nil {
		return g, nil
	}
	f, hooks, err := b.newMeta()
	if err != nil {
		return nil, err
	}
	g, err := b.openMeta(f)
	if err != nil {
		return nil, fmt.Errorf("reopening the meta group: %w", err)
	}
	b.mu.Lock()
	b.meta, b.metaHooks = f, hooks
	b.mu.Unlock()
	b.setMetaGroup(g)
	hooks.live.Store(true) // it has caught up: what it applies from now on is news
	return g, nil
}

// metaFailed stops the meta group after a failed proposal while the store refuses writes; the
// next admin change reopens it. The caller holds adminMu.
func (b *Broker) metaFailed() {
	g := b.metaGroupNow()
	if b.db.Health().Err == nil || g == nil {
		return
	}
	if err := g.Shutdown(); err != nil {
		b.log.Error("stopping the meta group failed", "err", err)
	}
	b.setMetaGroup(nil)
}

// storageMetrics are fila_storage_writable, fila_storage_write_failures_total,
// fila_queue_groups_awake, fila_body_cache_bytes and, when the store has an LSM tree,
// fila_storage_lsm_*.
func (b *Broker) storageMetrics() []prometheus.Collector {
	var lsm []prometheus.Collector
	if l, ok := b.db.(storage.LSM); ok {
		lsm = append(lsm, newLSMCollector(l))
	}
	return append(lsm,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fila", Name: "storage_writable",
			Help: "1 while the store accepts writes; 0 after a write failed (full disk, I/O error), until writes succeed again."},
			func() float64 {
				if b.StorageHealth() != nil {
					return 0
				}
				return 1
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "fila", Name: "storage_write_failures_total",
			Help: "Writes to the store that failed, or were refused while it did not accept writes."},
			func() float64 { return float64(b.StorageWriteFailures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fila", Name: "queue_groups_awake",
			Help: "Queue groups (a queue and its dead-letter queue) whose actor and Raft group run; the others hibernate (queue_idle_timeout)."},
			func() float64 { return float64(b.AwakeQueues()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fila", Name: "body_cache_bytes",
			Help: "Bytes of message bodies held in memory for delivery soon after their enqueue, all queues together (bounded by body_cache_bytes)."},
			func() float64 { return float64(b.cacheBytes.Load()) }),
	)
}
