// Package meta is the meta group's state machine: the catalog of queue definitions (queues and
// their dead-letter queues), the runtime config, the API keys and ACLs, the cluster's members and
// where each queue group lives.
//
// Every node applies the whole meta log, so every node holds the same catalog. Applying a command
// decides everything that depends on the state — whether a CreateQueue's name is free, where
// the new group goes — from the state alone: two nodes racing to create one name both propose,
// the log orders them, and the first applied wins on every node while the second is refused
// alike everywhere (Refused). Nothing node-local (a registry of open queues, a mutex) takes part.
//
// Applying also tells the node what to host: after each change of a queue group the FSM calls
// its Reconciler with the group's Assignment (its definitions and replicas) or with a Drop, on
// the apply goroutine, in log order; after a Restore it tells the whole set. The node registry
// compares the replicas with its own ID and opens or closes its local replica. This is the shape
// of NATS JetStream's meta group, whose apply turns stream assignments into local streams.
//
// Placement (placement.go) puts a new group on `replication` members (3 by default, fewer in a
// smaller cluster), its preferred leader being the member that leads the fewest groups, so that
// leaderships spread evenly. A node that knows no members (a single node, or a data directory
// written before membership existed) hosts every group itself.
//
// A sharded queue (its definition's Shards, 2..shard.Max, fixed at creation) is one queue group
// per shard, each placed like a queue of its own: shard 0 is the group named as the queue, shard
// i ≥ 1 the group shard.Name(queue, i), whose definition is the queue's with ShardOf and
// ShardIndex set. A CreateQueue creates them all, an UpdateQueue of the queue (or its dead-letter
// queue) changes them all, a DeleteQueue drops them all; a shard alone cannot be deleted.
//
// Removing a member (membership.go) places each group it replicated again: another member takes
// its place, recorded as joining until it has caught up (ReplicaCaughtUp); the removed ID is
// held until every group (and the meta group) has it out of its Raft configuration (ReplicaLeft),
// then released for a fresh node. A member added tops up the groups short of replicas.
//
// Each throttle used across nodes has one owner node (throttles.go, ClaimThrottle): the first
// claim of an unowned throttle wins, a claim naming the current owner's epoch replaces it, and a
// removed member's throttles are left without an owner; every owner has the next epoch.
//
// The package imports no broker: the broker proposes the commands built here and reads the
// Catalog. imports_test.go checks that neither meta nor queuegroup ever imports it.
package meta
