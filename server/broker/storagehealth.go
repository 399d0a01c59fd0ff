package broker

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/storage"
)

// When a write to the store fails (a full disk, an I/O error, a read-only file system), the
// store refuses every write until the disk takes writes again (server/storage, guard.go). The
// broker meanwhile:
//
//   - answers every request that needs a write (Enqueue, Ack, Nack, ExtendLease, every admin
//     change) StorageError at once, before it reaches a queue — except, on a cluster node, the
//     items for queues another node leads, which are forwarded as ever (writesHere: a full disk
//     on one node does not stop its clients' traffic to the others);
//   - keeps serving what needs no write: stats, listings, and deliveries of queues with fast
//     delivery durability (their leases are not logged);
//   - stops the Raft group of each queue whose proposal failed (the actor is then suspended: it
//     answers from the state it holds, which may include the failed rounds, whose outcome is
//     unknown) and the meta group when its proposal failed, so that no Raft goroutine has to store
//     a term while writes fail (hashicorp/raft panics when it cannot);
//   - on a cluster node, stands down at once (standDown): every queue group it leads is stopped
//     the same way, and the meta group if it leads it, so that their other replicas elect a
//     leader that can write — a queue led here would otherwise refuse every write, forwarded ones
//     included, for as long as the disk is full, without ever failing over;
//   - once the store accepts writes again, reopens each suspended group from its snapshot and
//     log (watchStorage) — a group another node leads meanwhile as its follower — and the meta
//     group (on a single node, on the next admin change).
//
// A store can also be stuck (storage Health.Stuck): a commit failed inside Pebble in a way no
// process but a new one gets past, and requests in flight there never return. StorageStuck tells
// the server, which exits so that its supervisor restarts it.

// StorageHealth returns nil while the store accepts writes, else why it does not (for /healthz).
func (b *Broker) StorageHealth() error { return b.db.Health().Err }

// StorageWriteFailures counts the writes that failed or were refused since the start.
func (b *Broker) StorageWriteFailures() int64 { return b.db.Health().Failures }

// writesHere reports whether a request for the actor's queue is written on this node: its
// replica here leads the group, or the group sleeps here (waking it stores its term).
func (a *actor) writesHere() bool { return a.leadingNow.Load() || a.dorm.sleeping.Load() }

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
			b.reopenMeta()
		} else if b.clustered() {
			b.standDown(h.Err)
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
		a.postIfAwake(func(a *actor) { // a follower that stood down too (standDown)
			if a.suspended {
				a.resume()
			}
		})
	}
}

// standDown stops, on a cluster node whose store refuses writes, every queue group it leads and
// the meta group if it leads it: their other replicas elect a leader that can write. Each stopped
// queue group is suspended until the store accepts writes again (resumeSuspended).
func (b *Broker) standDown(cause error) {
	for _, a := range b.actors() {
		a.postIfAwake(func(a *actor) { a.standDown(cause) })
	}
	go func() { // the meta group may be waiting on a proposal: never on the watcher
		b.adminMu.Lock()
		defer b.adminMu.Unlock()
		if g := b.metaGroupNow(); g != nil && g.Leader() {
			b.log.Warn("the store refuses writes: this node stops leading the meta group until it takes writes again", "err", cause)
			b.metaFailed()
		}
	}()
}

// standDown, while the store refuses writes on a cluster node, stops the group when this replica
// leads it or raft elected it: the actor gives the leadership up (its subscriptions end
// NotLeader, requests go to the other replicas) and stays suspended, its group stopped, until
// the store takes writes again (resumeSuspended reopens it as a follower, or as the leader
// raft elects).
func (a *actor) standDown(cause error) {
	if a.suspended || a.deleted || a.g == nil || !a.b.clustered() || a.b.db.Health().Err == nil || !a.leading && !a.g.Leader() {
		return
	}
	a.log.Warn("the store refuses writes: this node stops leading the queue until it takes writes again", "err", cause)
	a.demote()
	a.stopGroup()
	a.suspended = true
}

// standInLeader is whom a replica stopped by standDown names as the group's leader: the leader
// a forwarded request learnt, else another replica, which forwards or redirects to the one that
// leads ("" when it has none).
func (a *actor) standInLeader() meta.NodeID {
	if f := a.b.fwd; f != nil {
		f.mu.RLock()
		to := f.routes[a.name]
		f.mu.RUnlock()
		if to != "" {
			return to
		}
	}
	for _, id := range a.replicas {
		if id != a.b.nodeID() {
			return id
		}
	}
	return ""
}

// reopenMeta reopens, on a cluster node whose store accepts writes again, the meta group a failed
// write or a stand-down stopped (a single node reopens it on its next admin change).
func (b *Broker) reopenMeta() {
	if !b.clustered() || !b.metaStopped.Load() {
		return
	}
	go func() {
		b.adminMu.Lock()
		defer b.adminMu.Unlock()
		if !b.metaStopped.Load() {
			return // an admin change reopened it first
		}
		if _, err := b.metaGroupForWrite(); err != nil {
			b.log.Warn("reopening the meta group after the store recovered failed; the next admin change tries again", "err", err)
		}
	}()
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
	b.metaStopped.Store(false)
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
	b.metaStopped.Store(true)
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
