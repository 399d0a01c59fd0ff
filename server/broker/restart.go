package broker

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/raftgroup"
)

// A cluster node's start. The meta group's state machine holds, when the group opens, only what
// its last snapshot restored: raft applies the entries after it once a leader has told this node
// they committed. The leader has applied them all when it is known to lead (AwaitRole's
// barrier), a follower not yet. Started on such a catalog, a follower registered few or none of
// its replicas asleep from their summaries (recover), and the registry opened every other one
// once the node had started, as a new group: thousands of groups standing for election at once
// after a restart of a node with many idle queues (of 2,000 queues on three nodes, one follower
// recovered 737 and the other none; groups failed to open, "leadership lost while committing
// log", and an enqueue was answered StorageError). So the start waits, bounded, until the meta
// state machine has applied everything the leader told this node committed before it reads the
// catalog. raft's own applied index does not say so: raft counts an entry applied once it has
// handed it to the state machine's goroutine, which may be hundreds of entries behind; the
// state machine's own index does (metaApplied).

// metaCatchUpTimeout bounds that wait: past it the start goes on with what it has applied (the
// registry opens the rest, as before). A variable so that tests can lower it.
var metaCatchUpTimeout = 10 * time.Second

// metaApplied is the meta state machine as the meta group runs it, with the index of the last
// entry it applied.
type metaApplied struct {
	raft.FSM
	index *atomic.Uint64
	snaps raft.SnapshotStore
}

func (m metaApplied) Apply(l *raft.Log) any {
	r := m.FSM.Apply(l)
	m.index.Store(l.Index)
	return r
}

// Restore restores a snapshot a leader installed (or the latest one at the start): the state
// machine then holds every entry up to that snapshot's index, the latest in the store.
func (m metaApplied) Restore(rc io.ReadCloser) error {
	if err := m.FSM.Restore(rc); err != nil {
		return err
	}
	if metas, err := m.snaps.List(); err == nil && len(metas) > 0 && metas[0].Index > m.index.Load() {
		m.index.Store(metas[0].Index)
	}
	return nil
}

// awaitMetaApplied waits, at most awaitTimeout, until the meta state machine itself has applied
// the entry at index: raft's applied index (Group.AwaitApplied) counts an entry once it is
// handed to the state machine's goroutine, before the catalog holds it and before the registry
// has queued the change it makes. An admin request answered then, such as a CreateQueue, would
// be followed by an UpdateQueue on the same node answering QueueNotFound.
func (b *Broker) awaitMetaApplied(g *raftgroup.Group, index uint64) error {
	deadline := time.Now().Add(awaitTimeout)
	if err := g.AwaitApplied(index, awaitTimeout); err != nil {
		return err
	}
	for b.metaIndex != nil && b.metaIndex.Load() < index {
		if time.Now().After(deadline) {
			return fmt.Errorf("broker: meta entry %d not applied here after %v", index, awaitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// watchMetaApplied has fsm count the entries it applies in b.metaIndex, starting from the
// latest snapshot in snaps (raft restores it when the group opens, before any entry).
func (b *Broker) watchMetaApplied(fsm raft.FSM, snaps raft.SnapshotStore) raft.FSM {
	b.metaIndex = new(atomic.Uint64)
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		b.metaIndex.Store(metas[0].Index)
	}
	return metaApplied{FSM: fsm, index: b.metaIndex, snaps: snaps}
}

// awaitMetaCurrent waits until the meta state machine has applied every command entry this node
// knows committed (raftgroup.Group.Current, then the last command entry up to what raft applied),
// and its admission under a removed node's ID if it was (replace.go), at most metaCatchUpTimeout;
// a node alone needs no wait.
func (b *Broker) awaitMetaCurrent(g *raftgroup.Group) {
	if b.opts.Cluster.Network == nil || b.metaIndex == nil {
		return
	}
	start := time.Now()
	deadline := start.Add(metaCatchUpTimeout)
	var target uint64
	known := false
	for {
		if !known && g.Current() {
			target, known = lastCommandApplied(g), true
		}
		// A node admitted under a removed node's ID (Cluster.AdmittedAt) also waits past its
		// admission: before it, its meta state holds the old node's removal, which the registry
		// must not carry out on this node's replicas.
		if known && b.metaIndex.Load() >= max(target, b.opts.Cluster.AdmittedAt) {
			break
		}
		if time.Now().After(deadline) {
			b.log.Warn("the meta state has not caught up with its leader; starting with what it applied (the registry opens the other groups)",
				"waited", time.Since(start).Round(time.Millisecond), "applied", b.metaIndex.Load(), "target", target)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		b.log.Info("the meta state caught up with its leader", "took", d.Round(time.Millisecond), "index", target)
	}
}

// lastCommandApplied is the index of the last command entry raft has applied (handed to the
// state machine): what the state machine must reach. 0 when the log holds none (the snapshot
// restored at the start holds them).
func lastCommandApplied(g *raftgroup.Group) uint64 {
	first, last := g.Stats()
	i := last
	for i > first && g.AwaitApplied(i, 0) != nil {
		i-- // (Current: raft applied what the leader said committed; the log may hold more)
	}
	return lastCommandUpTo(g, i)
}

// lastCommandUpTo is the index of the last command entry at or before index i of g's log (raft's
// own entries never reach the state machine), 0 when there is none or the log cannot be read.
func lastCommandUpTo(g *raftgroup.Group, i uint64) uint64 {
	first, _ := g.Stats()
	logs := g.Store()
	for ; i >= first && i > 0; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return 0
		}
		if l.Type == raft.LogCommand {
			return i
		}
	}
	return 0
}

// openLater takes a cluster node's replicated groups out of what its start opens before the node
// is ready (the groups recover could not register asleep: no stored summary, or one its log has
// moved past — an unsynced summary lost to kill -9, an entry after the Hibernate one). Opening
// one waits for its election, which needs another replica, and the other nodes, starting too,
// refuse its Raft messages until their own starts end: three nodes each waiting for a group the
// others had not opened failed their starts after a minute ("no leader after 1m0s", 2-4 groups
// per node of 10,000). The registry opens them instead once the start has handed it the
// assignments (recover's reconciliation), while the node serves the others. It returns the
// assignments and actors recover publishes and the actors it opens itself.
func (b *Broker) openLater(assigned []meta.Assignment, actors, opened []*actor) ([]meta.Assignment, []*actor, []*actor, int) {
	if b.opts.Cluster.Network == nil {
		return assigned, actors, opened, 0
	}
	later := map[*actor]bool{}
	now := opened[:0:0]
	for _, a := range opened {
		if a.replicated() {
			later[a] = true
			continue
		}
		now = append(now, a)
	}
	if len(later) == 0 {
		return assigned, actors, opened, 0
	}
	var asg []meta.Assignment
	var acts []*actor
	for i, a := range actors {
		if !later[a] {
			asg, acts = append(asg, assigned[i]), append(acts, a)
		}
	}
	return asg, acts, now, len(later)
}
