// Package registry is a node's registry of its local queue-group replicas: it owns them, and it
// reconciles them with the meta group's assignments.
//
// Every node applies the whole meta log (server/meta); after each change of a queue group the
// meta state machine tells the registry the group's Assignment, or that it was dropped. The
// registry then reads the group's current assignment from the catalog (a Source), compares its
// replicas with this node's ID, and opens the local replica, updates it, or closes it (deleting
// its data when the group is gone). Reconciling with the current state rather than with each
// change makes a replay of old changes harmless: a group created and deleted long ago is never
// opened again. Nothing else creates or
// deletes a replica: a node that did not propose a CreateQueue hosts the queue exactly as the one
// that did, because both apply the same log.
//
// # Duties and guarantees
//
//   - The changes of one group are carried out one after the other, each after the one before has
//     finished; changes of different groups run concurrently, so a group that
//     is slow to open delays no other.
//   - The meta state machine's apply goroutine never waits here: Assign and Drop only queue the
//     change (opening a Raft group can wait for an election).
//   - Lookups (Lookup, Each) are safe for concurrent use and cheap: they are on every request's
//     path. A replica is published once its Open returned, and unpublished before its Close.
//   - Await lets the node that proposed a change wait until it is carried out here.
//
// The registry knows nothing of what a replica runs: the Host (the broker) opens replicas and
// runs the leader's runtime on them. It imports server/meta and nothing of the broker.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/filamq/fila/server/meta"
)

// Replica is a local replica of a queue group, as the Host runs it.
type Replica interface {
	// Update hands the replica the group's new assignment (a definition changed); its error is
	// what Await answers.
	Update(a meta.Assignment) error
	// Close stops the replica; drop deletes its data too (the group was deleted, or this node
	// no longer replicates it).
	Close(drop bool)
}

// Host opens the local replicas of queue groups.
type Host[R Replica] interface {
	// Open starts this node's replica of the group a describes.
	Open(a meta.Assignment) (R, error)
}

// Source is where the registry reads a group's current assignment (meta.Catalog).
type Source interface {
	Assignment(queue string) (meta.Assignment, bool)
}

// Ref locates a queue: the replica of its group, and whether it is the group's dead-letter queue.
type Ref[R Replica] struct {
	Replica    R
	DeadLetter bool
}

// Registry holds a node's replicas. Its zero value is not usable: call New.
type Registry[R Replica] struct {
	self meta.NodeID
	host Host[R]
	src  Source
	log  *slog.Logger

	mu       sync.RWMutex
	started  bool
	closed   bool
	groups   map[string]R      // by group (queue) name
	names    map[string]Ref[R] // every queue name of every group: the queue and its dead-letter queue
	work     map[string]*lane  // groups with changes to carry out
	failures map[string]error  // the last change of a group that failed, until the next succeeds
	wg       sync.WaitGroup
}

// lane is one group's queue of changes, carried out by one goroutine while it has any.
type lane struct {
	pending []change
	idle    chan struct{} // closed when the pending changes are all carried out
}

type change struct{ group string }

// New returns a registry for node self that opens replicas through host, as src assigns them.
func New[R Replica](self meta.NodeID, host Host[R], src Source, log *slog.Logger) *Registry[R] {
	if log == nil {
		log = slog.Default()
	}
	return &Registry[R]{self: self, host: host, src: src, log: log, groups: map[string]R{}, names: map[string]Ref[R]{},
		work: map[string]*lane{}, failures: map[string]error{}}
}

// Start publishes the replicas the node opened at start-up (the groups the meta state assigned
// it then) and begins reconciling: the changes heard before Start are dropped, since opened
// already reflects the state they led to.
func (r *Registry[R]) Start(opened []meta.Assignment, replicas []R) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range opened {
		r.publish(&opened[i], replicas[i])
	}
	r.started = true
}

// Assign queues the reconciliation of a group that changed (meta.Reconciler).
func (r *Registry[R]) Assign(a meta.Assignment) { r.enqueue(change{group: a.Name()}) }

// Drop queues the reconciliation of a group that was deleted (meta.Reconciler).
func (r *Registry[R]) Drop(group string) { r.enqueue(change{group: group}) }

func (r *Registry[R]) enqueue(c change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.closed {
		return
	}
	l := r.work[c.group]
	if l == nil {
		l = &lane{idle: make(chan struct{})}
		r.work[c.group] = l
		r.wg.Add(1)
		go r.run(c.group, l)
	}
	l.pending = append(l.pending, c)
}

// run carries out a group's changes in order, then retires its lane.
func (r *Registry[R]) run(group string, l *lane) {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		if len(l.pending) == 0 {
			delete(r.work, group)
			close(l.idle)
			r.mu.Unlock()
			return
		}
		c := l.pending[0]
		l.pending = l.pending[1:]
		closed := r.closed
		r.mu.Unlock()
		if closed {
			continue
		}
		err := r.carryOut(c)
		r.mu.Lock()
		if err != nil {
			r.failures[group] = err
		} else {
			delete(r.failures, group)
		}
		r.mu.Unlock()
	}
}

// carryOut brings the group's local replica in line with the group's current assignment.
func (r *Registry[R]) carryOut(c change) error {
	r.mu.RLock()
	rep, has := r.groups[c.group]
	r.mu.RUnlock()
	a, exists := r.src.Assignment(c.group)
	wanted := exists && a.Name() == c.group && a.Has(r.self)
	switch {
	case wanted && has:
		if err := rep.Update(a); err != nil {
			return fmt.Errorf("updating queue %q here: %w", c.group, err)
		}
	case wanted:
		opened, err := r.host.Open(a)
		if err != nil {
			r.log.Error("opening the local replica of a queue failed", "queue", c.group, "err", err)
			return fmt.Errorf("opening queue %q here: %w", c.group, err)
		}
		r.mu.Lock()
		r.publish(&a, opened)
		r.mu.Unlock()
	case has:
		r.mu.Lock()
		r.unpublish(c.group)
		r.mu.Unlock()
		rep.Close(true)
	}
	return nil
}

// publish makes a replica reachable by its group's queue names; r.mu is held.
func (r *Registry[R]) publish(a *meta.Assignment, rep R) {
	r.groups[a.Name()] = rep
	r.names[a.Queue.Name] = Ref[R]{Replica: rep}
	r.names[a.DeadLetter.Name] = Ref[R]{Replica: rep, DeadLetter: true}
}

// unpublish removes a group's replica and its names; r.mu is held.
func (r *Registry[R]) unpublish(group string) {
	delete(r.groups, group)
	delete(r.names, group)
	delete(r.names, meta.DeadLetterName(group))
}

// Lookup finds the local replica of the group a queue (or dead-letter queue) name belongs to.
func (r *Registry[R]) Lookup(name string) (Ref[R], bool) {
	r.mu.RLock()
	ref, ok := r.names[name]
	r.mu.RUnlock()
	return ref, ok
}

// Names returns every queue name the local replicas serve, sorted.
func (r *Registry[R]) Names() []string {
	r.mu.RLock()
	names := make([]string, 0, len(r.names))
	for n := range r.names {
		names = append(names, n)
	}
	r.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Replicas returns every local replica, by group name.
func (r *Registry[R]) Replicas() map[string]R {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]R, len(r.groups))
	for k, v := range r.groups {
		out[k] = v
	}
	return out
}

// Await waits until every change of group heard so far is carried out here, and returns the
// last one's failure, if it failed.
func (r *Registry[R]) Await(ctx context.Context, group string) error {
	r.mu.RLock()
	l := r.work[group]
	r.mu.RUnlock()
	if l != nil {
		select {
		case <-l.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.failures[group]
}

// ErrClosed is what a closed registry's Close returns the second time.
var ErrClosed = errors.New("registry: closed")

// Close stops reconciling: changes still queued are dropped, those being carried out finish.
// It returns the replicas, for the host to stop; the registry forgets them.
func (r *Registry[R]) Close() (map[string]R, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.groups
	r.groups, r.names = map[string]R{}, map[string]Ref[R]{}
	return out, nil
}
