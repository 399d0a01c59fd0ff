package meta

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/store"
)

// The commands a proposer builds. Validation that needs no state (a definition's settings, Lua
// hooks) is the proposer's; what depends on the state is decided in apply.

// CreateQueue is the command that creates the queue group of def (a queue, not a dead-letter
// queue) with its dead-letter queue, on replication nodes (0 = DefaultReplication), unless
// maxQueues groups (0 = no limit) exist already.
func CreateQueue(def *store.QueueRecord, replication, maxQueues uint32) *queuelog.CreateQueue {
	return &queuelog.CreateQueue{Definition: def.AppendTo(nil), Replication: replication, MaxQueues: maxQueues}
}

// DeleteQueue is the command that deletes the queue group of queue.
func DeleteQueue(queue string) *queuelog.DeleteQueue { return &queuelog.DeleteQueue{Name: queue} }

// UpdateQueue is the command that replaces the definition of an existing queue or dead-letter
// queue.
func UpdateQueue(def *store.QueueRecord) *queuelog.UpdateQueue {
	return &queuelog.UpdateQueue{Definition: def.AppendTo(nil)}
}

// PutNode is the command that adds node n to the members, or changes its addresses (an empty
// one keeps what is recorded).
func PutNode(n Node) *queuelog.PutMember {
	return &queuelog.PutMember{ID: string(n.ID), Address: n.Address, Advertise: n.Advertise}
}

// SetDraining is the command that starts (drain) or cancels the drain of member id.
func SetDraining(id NodeID, drain bool) *queuelog.SetDraining {
	return &queuelog.SetDraining{ID: string(id), Draining: drain}
}

// PutQueue is the command that stores a definition without any check (what CreateQueue and
// UpdateQueue replace; logs written before them hold it).
func PutQueue(def *store.QueueRecord) *queuelog.PutQueue {
	return &queuelog.PutQueue{Definition: def.AppendTo(nil)}
}

// Entry encodes commands as one log entry.
func Entry(cmds ...queuelog.Frame) []byte {
	var entry []byte
	for _, c := range cmds {
		entry = queuelog.AppendFrame(entry, c)
	}
	return entry
}

// apply applies one command; c.mu is held.
func (c *Catalog) apply(f queuelog.Frame, ch *changes) error {
	switch cmd := f.(type) {
	case *queuelog.CreateQueue:
		return c.createQueue(cmd, ch)
	case *queuelog.DeleteQueue:
		return c.deleteQueue(cmd.Name, ch)
	case *queuelog.UpdateQueue:
		return c.updateQueue(cmd, ch)
	case *queuelog.PutMember:
		return c.putNode(cmd, ch)
	case *queuelog.SetDraining:
		return c.setDraining(cmd, ch)
	case *queuelog.RemoveMember:
		return c.removeMember(cmd, ch)
	case *queuelog.ReplicaCaughtUp:
		c.caughtUp(cmd, ch)
	case *queuelog.ReplicaLeft:
		c.replicaLeft(cmd)
	case *queuelog.ClaimThrottle:
		return c.claimThrottle(cmd, ch)
	case *queuelog.PutNode: // a log written before PutMember
		return c.putNode(&queuelog.PutMember{ID: cmd.ID, Address: cmd.Address}, ch)
	case *queuelog.PutQueue:
		def, err := decodeDefinition(cmd.Definition)
		if err != nil {
			return fmt.Errorf("meta: queue definition: %w", err)
		}
		c.putLegacy(def, ch)
	case *queuelog.DropQueue:
		c.dropLegacy(cmd.Name, ch)
	case *queuelog.SetConfig:
		c.config[cmd.Key] = cmd.Value
		ch.config = append(ch.config, [2]string{cmd.Key, cmd.Value})
	case *queuelog.PutAPIKey, *queuelog.RevokeAPIKey, *queuelog.SetACL:
		return applyKey(c.keys, f)
	default:
		return fmt.Errorf("meta: %v is not a meta command", f.Opcode())
	}
	return nil
}

// decodeDefinition decodes a logged queue definition into a record of its own (the entry's
// buffer is not the catalog's to keep). A definition with more than shard.Max shards does not
// decode, whatever wrote it (a PutQueue stores what it is given, a snapshot comes from a peer): a
// DeleteQueue or UpdateQueue of its queue would loop over every one of them (FuzzRestore's seed
// 74223b21eb5a9b1c had about 2^32, FuzzApply's 910ab070882ff976 wrote one with a PutQueue).
func decodeDefinition(b []byte) (store.QueueRecord, error) {
	var def store.QueueRecord
	if err := def.Decode(bytes.Clone(b)); err != nil {
		return def, err
	}
	if def.Shards > shard.Max {
		return def, fmt.Errorf("queue %q has %d shards, more than %d", def.Name, def.Shards, shard.Max)
	}
	return def, nil
}

// createQueue validates and carries out a CreateQueue.
func (c *Catalog) createQueue(cmd *queuelog.CreateQueue, ch *changes) error {
	def, err := decodeDefinition(cmd.Definition)
	name, dlq := def.Name, DeadLetterName(def.Name)
	switch {
	case err != nil:
		return refuse(CodeInvalidDefinition, "the queue definition does not decode: %v", err)
	case def.DLQOf != "":
		return refuse(CodeInvalidDefinition, "queue %q: a created queue is no dead-letter queue", name)
	case !ValidQueueName(name):
		return refuse(CodeInvalidName, "queue name %q must be 1 to 255 bytes of UTF-8 without spaces, *, control or bidi-override characters", name)
	case strings.HasSuffix(name, DeadLetterSuffix):
		return refuse(CodeReservedName, "queue names ending in %q are reserved for dead-letter queues", DeadLetterSuffix)
	}
	if _, ok := c.queues[name]; ok {
		return refuse(CodeQueueExists, "queue %q already exists", name)
	}
	if _, ok := c.queues[dlq]; ok {
		return refuse(CodeQueueExists, "queue %q already exists", dlq)
	}
	if def.Shards > shard.Max || def.ShardOf != "" || def.ShardIndex != 0 {
		return refuse(CodeInvalidDefinition, "queue %q: a queue has 1 to %d shards (got %d), and names no shard_of", name, shard.Max, def.Shards)
	}
	if cmd.MaxQueues != 0 && c.groups+int(max(def.Shards, 1)) > int(cmd.MaxQueues) {
		return refuse(CodeTooManyQueues, "this node holds its maximum of %d queues (max_queues, a shard counting as one); delete a queue or raise max_queues", cmd.MaxQueues)
	}
	for i := uint32(1); i < def.Shards; i++ {
		if _, ok := c.queues[shard.Name(name, i)]; ok { // never: no created name has a '*'
			return refuse(CodeQueueExists, "queue %q already exists", shard.Name(name, i))
		}
	}
	for i := uint32(0); i < max(def.Shards, 1); i++ {
		q := shardRecord(&def, i)
		ch.touch(c, q.Name)
		c.putQueue(q)
		c.putQueue(deadLetterRecord(&q))
		c.place(q.Name, cmd.Replication)
	}
	return nil
}

// shardRecord is the definition of shard i's queue of queue def: def itself for shard 0, else
// a copy named as the shard's group (shard.Name) that records its queue and index.
func shardRecord(def *store.QueueRecord, i uint32) store.QueueRecord {
	q := *def
	if i > 0 {
		q.Name, q.Shards, q.ShardOf, q.ShardIndex = shard.Name(def.Name, i), 0, def.Name, i
	}
	return q
}

// shardsOf is the shard count of queue q (1 when it is not sharded).
func shardsOf(q *store.QueueRecord) uint32 { return max(q.Shards, 1) }

// deleteQueue validates and carries out a DeleteQueue.
func (c *Catalog) deleteQueue(name string, ch *changes) error {
	q, ok := c.queues[name]
	switch {
	case !ok:
		return refuse(CodeQueueNotFound, "queue %q does not exist", name)
	case q.DLQOf != "":
		return refuse(CodeDeadLetterQueue, "queue %q is the dead-letter queue of %q: it is deleted with it", name, q.DLQOf)
	case q.ShardOf != "":
		return refuse(CodeQueueNotFound, "queue %q does not exist", name) // a shard goes with its queue
	}
	for i := uint32(0); i < shardsOf(&q); i++ {
		g := shard.Name(name, i)
		ch.touch(c, g)
		c.dropQueue(g)
		if d, ok := c.queues[DeadLetterName(g)]; ok && d.DLQOf == g {
			c.dropQueue(d.Name)
		}
	}
	return nil
}

// updateQueue validates and carries out an UpdateQueue.
func (c *Catalog) updateQueue(cmd *queuelog.UpdateQueue, ch *changes) error {
	def, err := decodeDefinition(cmd.Definition)
	if err != nil {
		return refuse(CodeInvalidDefinition, "the queue definition does not decode: %v", err)
	}
	old, ok := c.queues[def.Name]
	switch {
	case !ok:
		return refuse(CodeQueueNotFound, "queue %q does not exist", def.Name)
	case def.DLQOf != old.DLQOf || def.CreatedAt != old.CreatedAt || def.Shards != old.Shards || def.ShardOf != old.ShardOf ||
		def.ShardIndex != old.ShardIndex:
		return refuse(CodeInvalidDefinition, "queue %q: an update keeps the queue's dlq_of, created_at and shards", def.Name)
	}
	parent := def
	if def.DLQOf != "" {
		parent = c.queues[def.DLQOf]
	}
	for i := uint32(0); i < shardsOf(&parent); i++ { // a sharded queue's update is every shard's
		q := shardRecord(&def, i)
		if def.DLQOf != "" && i > 0 {
			q = def
			q.DLQOf = shard.Name(def.DLQOf, i)
			q.Name = DeadLetterName(q.DLQOf)
		}
		if _, ok := c.queues[q.Name]; !ok {
			continue
		}
		ch.touch(c, groupOf(&q))
		c.putQueue(q)
	}
	return nil
}

// putNode adds a member or changes its addresses (an empty one stays as it was); the first member
// gets every group placed while none was known, and a new member tops up the groups short of
// replicas (membership.go). A removed ID is refused until released (readmit).
func (c *Catalog) putNode(cmd *queuelog.PutMember, ch *changes) error {
	if cmd.ID == "" {
		return refuse(CodeInvalidNode, "a node needs an ID")
	}
	if err := c.readmit(NodeID(cmd.ID), cmd.Address); err != nil {
		return err
	}
	a, member := c.nodes[NodeID(cmd.ID)]
	if cmd.Address != "" {
		a.address = cmd.Address
	}
	if cmd.Advertise != "" {
		a.advertise = cmd.Advertise
	}
	c.nodes[NodeID(cmd.ID)] = a
	for _, name := range c.placeUnplaced() {
		ch.touch(c, name)
	}
	if !member {
		c.topUp(NodeID(cmd.ID), ch)
	}
	return nil
}

// setDraining starts or cancels a member's drain.
func (c *Catalog) setDraining(cmd *queuelog.SetDraining, ch *changes) error {
	a, ok := c.nodes[NodeID(cmd.ID)]
	if !ok {
		return refuse(CodeNodeNotFound, "no node of the cluster has the ID %q", cmd.ID)
	}
	a.draining = cmd.Draining
	c.nodes[NodeID(cmd.ID)] = a
	ch.drains = append(ch.drains, Node{ID: NodeID(cmd.ID), Draining: cmd.Draining})
	return nil
}

// putLegacy carries out a PutQueue: def is stored as it is, and a new group is placed.
func (c *Catalog) putLegacy(def store.QueueRecord, ch *changes) {
	if old, ok := c.queues[def.Name]; ok && groupOf(&old) != groupOf(&def) {
		ch.touch(c, groupOf(&old))
	}
	ch.touch(c, groupOf(&def))
	c.putQueue(def)
	if _, placed := c.placements[def.Name]; def.DLQOf == "" && !placed && len(c.nodes) > 0 {
		c.place(def.Name, 0)
	}
}

// dropLegacy carries out a DropQueue: the one definition goes, with its group's placement when
// it is the group's queue.
func (c *Catalog) dropLegacy(name string, ch *changes) {
	q, ok := c.queues[name]
	if !ok {
		return
	}
	ch.touch(c, groupOf(&q))
	c.dropQueue(name)
}

// groupOf is the name of the group q belongs to.
func groupOf(q *store.QueueRecord) string {
	if q.DLQOf != "" {
		return q.DLQOf
	}
	return q.Name
}
