package meta

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
)

// A meta snapshot is a sequence of snapshot frames (spec/queuelog.yaml), each kind sorted by its
// key so that two nodes with one state write the same bytes:
//
//	SnapshotQueue*      every queue and dead-letter queue definition
//	SnapshotConfig*     every runtime config entry
//	SnapshotAPIKey*     every API key with its ACL
//	SnapshotMember*     every member (SnapshotNode in snapshots written before it, read still)
//	SnapshotDraining*   every member that is draining
//	SnapshotRemoved*    every node removed from the cluster whose removal is not complete
//	SnapshotReleased*   every node removed from the cluster whose ID is released
//	SnapshotPlacement*  every placed group (and every group created with a replication while no
//	                    member was known)
//	SnapshotJoining*    every replica placed by a RemoveMember that has not caught up yet
//	SnapshotLeaving*    every group whose Raft configuration may still hold a removed node
//	SnapshotThrottleOwner*  every throttle's owner (throttles.go)
//	SnapshotEnd         the count of the frames before it
//
// A snapshot of a state with no member and no placement is exactly what releases before
// membership wrote, and those releases' snapshots restore here. A SnapshotRemoved without any
// SnapshotLeaving (a snapshot written before ReplicaLeft existed) is restored as leaving the
// meta group and every group there is: its groups' leaders record each one left (ReplicaLeft),
// so the removal completes as if it had been recorded from the start.

// Snapshot copies the state; Persist writes it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	c := f.cat
	s := &snapshot{keys: c.keys.List()}
	c.mu.RLock()
	defer c.mu.RUnlock()
	s.queues = slices.Collect(maps.Values(c.queues))
	sort.Slice(s.queues, func(i, j int) bool { return s.queues[i].Name < s.queues[j].Name })
	s.config = maps.Clone(c.config)
	s.nodes = c.nodeList()
	for _, name := range slices.Sorted(maps.Keys(c.placements)) {
		p := c.placements[name]
		s.placements = append(s.placements, &queuelog.SnapshotPlacement{Queue: name, Replication: p.replication, Replicas: idStrings(p.replicas)})
		for _, id := range p.joining {
			s.joining = append(s.joining, &queuelog.SnapshotJoining{Queue: name, ID: string(id)})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.removed)) {
		left := c.removed[id]
		if len(left) == 0 {
			s.released = append(s.released, string(id))
			continue
		}
		s.removed = append(s.removed, string(id))
		for _, g := range slices.Sorted(maps.Keys(left)) {
			s.leaving = append(s.leaving, &queuelog.SnapshotLeaving{ID: string(id), Queue: g})
		}
	}
	s.throttles = c.throttleSnapshot()
	return s, nil
}

type snapshot struct {
	queues     []store.QueueRecord
	config     map[string]string
	keys       []auth.Record
	nodes      []Node
	placements []*queuelog.SnapshotPlacement
	joining    []*queuelog.SnapshotJoining
	removed    []string
	released   []string
	leaving    []*queuelog.SnapshotLeaving
	throttles  []*queuelog.SnapshotThrottleOwner
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	var buf []byte
	n := uint64(0)
	put := func(f queuelog.Frame) {
		buf = queuelog.AppendFrame(buf[:0], f)
		_, _ = w.Write(buf)
		n++
	}
	for i := range s.queues {
		put(&queuelog.SnapshotQueue{Definition: s.queues[i].AppendTo(nil)})
	}
	for _, k := range slices.Sorted(maps.Keys(s.config)) {
		put(&queuelog.SnapshotConfig{Key: k, Value: s.config[k]})
	}
	for i := range s.keys {
		put(keySnapshot(&s.keys[i]))
	}
	for _, nd := range s.nodes {
		put(&queuelog.SnapshotMember{ID: string(nd.ID), Address: nd.Address, Advertise: nd.Advertise})
	}
	for _, nd := range s.nodes {
		if nd.Draining {
			put(&queuelog.SnapshotDraining{ID: string(nd.ID)})
		}
	}
	for _, id := range s.removed {
		put(&queuelog.SnapshotRemoved{ID: id})
	}
	for _, id := range s.released {
		put(&queuelog.SnapshotReleased{ID: id})
	}
	for _, p := range s.placements {
		put(p)
	}
	for _, j := range s.joining {
		put(j)
	}
	for _, l := range s.leaving {
		put(l)
	}
	for _, o := range s.throttles {
		put(o)
	}
	put(&queuelog.SnapshotEnd{Frames: n})
	if err := w.Flush(); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (*snapshot) Release() {}

// Restore replaces the state with a snapshot's, then tells the Reconciler: a Drop for each group
// that is gone, an Assign for every group there is.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	next, keys, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("meta snapshot: %w", err)
	}
	c := f.cat
	c.mu.Lock()
	before := c.groupNames()
	c.queues, c.groups, c.config = next.queues, next.groups, next.config
	c.nodes, c.placements, c.removed = next.nodes, next.placements, next.removed
	c.throttles = next.throttles
	c.recount()
	after := c.groupNames()
	c.mu.Unlock()
	c.keys.Replace(keys)
	if f.rec == nil {
		return nil
	}
	for _, name := range before {
		if _, ok := slices.BinarySearch(after, name); !ok {
			f.rec.Drop(name)
		}
	}
	for _, name := range after {
		if a, ok := c.Assignment(name); ok {
			f.rec.Assign(a)
		}
	}
	return nil
}

// readSnapshot reads a snapshot into a new catalog's state, and its keys.
func readSnapshot(r io.Reader) (*Catalog, []auth.Record, error) {
	next := newCatalog("")
	var keys []auth.Record
	fr := wire.NewFrameReader(r, queuelog.HeaderSize, 64<<20)
	for frames := uint64(0); ; frames++ {
		body, err := fr.Next()
		if err != nil {
			return nil, nil, err
		}
		f, err := queuelog.Decode(queuelog.Opcode(body[0]), body[1:])
		if err != nil {
			return nil, nil, err
		}
		switch c := f.(type) {
		case *queuelog.SnapshotQueue:
			def, err := decodeDefinition(c.Definition)
			if err != nil {
				return nil, nil, err
			}
			next.putQueue(def)
		case *queuelog.SnapshotConfig:
			next.config[c.Key] = c.Value
		case *queuelog.SnapshotAPIKey:
			r, err := snapshotKey(c)
			if err != nil {
				return nil, nil, err
			}
			keys = append(keys, r)
		case *queuelog.SnapshotMember:
			next.nodes[NodeID(c.ID)] = addrs{address: c.Address, advertise: c.Advertise}
		case *queuelog.SnapshotNode:
			next.nodes[NodeID(c.ID)] = addrs{address: c.Address}
		case *queuelog.SnapshotDraining:
			a, ok := next.nodes[NodeID(c.ID)]
			if !ok {
				return nil, nil, fmt.Errorf("draining node %q is no member", c.ID)
			}
			a.draining = true
			next.nodes[NodeID(c.ID)] = a
		case *queuelog.SnapshotPlacement:
			next.placements[c.Queue] = placement{replication: c.Replication, replicas: nodeIDs(c.Replicas)}
		case *queuelog.SnapshotRemoved:
			next.removed[NodeID(c.ID)] = nil // its groups follow (SnapshotLeaving); none: an old snapshot
		case *queuelog.SnapshotReleased:
			next.removed[NodeID(c.ID)] = map[string]bool{}
		case *queuelog.SnapshotLeaving:
			left, ok := next.removed[NodeID(c.ID)]
			if !ok {
				return nil, nil, fmt.Errorf("leaving node %q is not removed", c.ID)
			}
			if left == nil {
				left = map[string]bool{}
				next.removed[NodeID(c.ID)] = left
			}
			left[c.Queue] = true
		case *queuelog.SnapshotJoining:
			p, ok := next.placements[c.Queue]
			if !ok || !slices.Contains(p.replicas, NodeID(c.ID)) {
				return nil, nil, fmt.Errorf("joining replica %q of %q is no replica", c.ID, c.Queue)
			}
			p.joining = append(p.joining, NodeID(c.ID))
			next.placements[c.Queue] = p
		case *queuelog.SnapshotThrottleOwner:
			next.throttles[c.Name] = ThrottleOwner{Node: NodeID(c.Owner), Epoch: c.Epoch, Since: c.Since}
		case *queuelog.SnapshotEnd:
			if c.Frames != frames {
				return nil, nil, errors.New("incomplete")
			}
			for name := range next.placements {
				if q, ok := next.queues[name]; !ok || q.DLQOf != "" {
					delete(next.placements, name) // of no group: nothing to place
				}
			}
			next.leavingEverywhere()
			return next, keys, nil
		default:
			return nil, nil, fmt.Errorf("unexpected %v", f.Opcode())
		}
	}
}

func idStrings(ids []NodeID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

func nodeIDs(ss []string) []NodeID {
	if len(ss) == 0 {
		return nil
	}
	out := make([]NodeID, len(ss))
	for i, s := range ss {
		out[i] = NodeID(s)
	}
	return out
}

// leavingEverywhere gives each removed node restored without its groups (a snapshot written before
// SnapshotLeaving) the meta group and every group: any of them may still hold it.
func (c *Catalog) leavingEverywhere() {
	for id, left := range c.removed {
		if left != nil {
			continue
		}
		left = map[string]bool{MetaGroupName: true}
		for _, name := range c.groupNames() {
			left[name] = true
		}
		c.removed[id] = left
	}
}
