package broker

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/queuegroup"
)

// The broker's side of the node registry (server/registry): it opens the local replica of a
// queue group the meta group assigns to this node (replicaHost.Open), and the replica — the
// group's actor — takes changed definitions (Update) and closes (Close).

// replicaHost opens replicas for the registry.
type replicaHost struct{ b *Broker }

// Open starts this node's replica of a's group: its Raft group, its state, and its actor.
func (h replicaHost) Open(a meta.Assignment) (*actor, error) {
	b := h.b
	name := a.Name()
	b.mu.Lock()
	undropped, closed := b.undropped[name], b.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if undropped { // a deleted queue's data is still there: it would come back
		if err := b.dropData(name); err != nil {
			return nil, fmt.Errorf("removing the data of the deleted queue %q: %w", name, err)
		}
		b.mu.Lock()
		delete(b.undropped, name)
		b.mu.Unlock()
	}
	act := newActor(b, a.Queue, a.DeadLetter)
	act.replicas = a.Replicas
	if err := act.open(); err != nil { // defined, and opened on the next start
		return nil, fmt.Errorf("starting the queue: %w", err)
	}
	b.mu.Lock()
	closed = b.closed
	b.mu.Unlock()
	if closed {
		act.stopGroup()
		return nil, ErrClosed
	}
	act.start()
	return act, nil
}

// Update takes the group's changed definitions: each lane whose definition changed runs with it
// from the next round on (syncConfig), and the hooks are compiled again. It returns once the
// change is durable in the group's log (a Configure command when the engine's configuration
// changed); a group this node only follows takes it when it leads.
func (a *actor) Update(asg meta.Assignment) error {
	defs := [2]store.QueueRecord{asg.Queue, asg.DeadLetter}
	// A sleeping group whose definitions did not change stays asleep: a node's start hands the
	// registry every assignment again (recover), which must not wake every group it registered
	// asleep.
	same := false
	if a.asleep(func(*summary) {
		same = sameDefinition(&a.lanes[0].def, &defs[0]) && sameDefinition(&a.lanes[1].def, &defs[1])
	}) && same {
		return nil
	}
	e, _ := a.commitCall(func(a *actor) *Error {
		changed := false
		for l := range a.lanes {
			if !sameDefinition(&a.lanes[l].def, &defs[l]) {
				a.lanes[l].def = defs[l]
				a.syncConfig(queuegroup.Lane(l))
				changed = true
			}
		}
		if changed {
			a.loadHooks()
		}
		return nil
	})
	if e != nil && e.Code != CodeNotLeader {
		return e
	}
	if e != nil { // a follower: the definitions are read again when it leads
		a.post(func(a *actor) { a.lanes[0].def, a.lanes[1].def = defs[0], defs[1] })
	}
	return nil
}

// sameDefinition reports whether two definitions say the same.
func sameDefinition(x, y *store.QueueRecord) bool {
	return bytes.Equal(x.AppendTo(nil), y.AppendTo(nil))
}

// Close stops the replica; drop (the group was deleted) deletes its data too, after its
// subscriptions heard that it was deleted.
func (a *actor) Close(drop bool) {
	if !drop {
		a.halt()
		<-a.done
		return
	}
	if _, exists := a.b.catalog().Assignment(a.name); exists && a.b.beforeAdmission() {
		// Not deleted: closed for the old node's removal of this ID, replayed before this node's
		// own admission (replace.go). It keeps its data, opened again as the state moves on.
		a.halt()
		<-a.done
		return
	}
	a.post(func(a *actor) { a.deleted = true })
	<-a.done
	if err := a.b.dropData(a.name); err != nil { // dropped on the next start, or by a CreateQueue of the name
		a.log.Error("removing a deleted queue's data failed", "err", err)
		a.b.mu.Lock()
		a.b.undropped[a.name] = true
		a.b.mu.Unlock()
	}
}

// awaitTimeout bounds how long a proposer waits for the registry to carry out a change here.
const awaitTimeout = time.Minute

// awaitGroup waits until the registry has carried out every change of group it heard so far.
func (b *Broker) awaitGroup(group string) error {
	ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
	defer cancel()
	return b.reg.Await(ctx, group)
}
