// Package chaos checks that fila-server keeps its promises while a nemesis breaks it.
//
// A run has three parts, each usable alone:
//
//   - A workload ([Workload]) of several clients of the Go SDK (client/fila) enqueueing,
//     consuming and acking against one or several fila-server addresses, recording every
//     operation with its invocation and response times and its outcome in a [Recorder]; at
//     the end [Drain] takes every message still stored and records that the queue is empty.
//
//   - A nemesis ([Nemesis]: kill -9 and restart, SIGSTOP and SIGCONT, a partition) that
//     injects a fault for a bounded time and heals it, recorded in the same history. [Cluster]
//     runs real fila-server processes on loopback for it; a [LinkProxy] stands on the links
//     between them and cuts a node off from the others (a partition) on demand.
//
//   - A checker ([Check]) of a model of queue semantics over the recorded history (a committed
//     queue, at-least-once delivery):
//
//     lost: every enqueue answered Ok is delivered during the final drain (still stored at the
//     end) unless an ack of it was answered Ok or left unanswered;
//     redelivered after ack: no message is delivered after an ack of it was answered Ok;
//     phantom: every delivery is of a message whose enqueue was invoked before it, not refused,
//     and answered with the delivery's message ID.
//
//     On a queue ordered by group, and for enqueues with an idempotency key (the sharded
//     workload, [ShardedWorkload]):
//
//     order: within one ordering group, a message is not delivered for the first time before
//     every message of its group whose enqueue was answered Ok before its own was invoked has
//     been delivered (leased no later than its first delivery). The rule is on first deliveries:
//     with at-least-once delivery an earlier message may be delivered again after a later one
//     (its ack unanswered, lost with a killed node), which says nothing of the order. It holds
//     because a group's messages are delivered one at a time in commit order
//     (docs/semantics/ordering.md): a later message is leased only once the earlier one was
//     acked, and so delivered to a consumer, the workload's. Enqueues of different clients
//     compare by real time: one answered Ok before another was invoked was committed first.
//     Unanswered enqueues order nothing (their commit may come later).
//     duplicate: enqueues of one value with one idempotency key are one message: two of them
//     answered Ok with different message IDs, a delivery of another ID than an answered one, or
//     (none answered) deliveries under two IDs, within DedupWindow of the first enqueue, are a
//     key that made two messages.
//
//     A duplicate delivery before any ack was answered Ok is at-least-once delivery, counted
//     but not a violation. Operations answered neither Ok nor with a broker's error (a lost
//     connection, a timeout), or answered NotLeader or NodeNotReady (a deposed leader's entry
//     may still commit), may or may not have taken effect and are read both ways.
//
// [Run] ties them together. TestKillRestartLosesNothing runs it briefly against one real
// fila-server killed -9 and restarted, TestPauseAndKillLoseNothing adds SIGSTOP/SIGCONT; both
// must pass. TestAckBeforeCommitFails shows the checker failing on purpose against a broker
// that acknowledges before the commit: fila-server with --fsync=false on a faultfs mount, and
// power cuts (kill -9, then every unsynced byte dropped). TestClusterFaultsLoseNothing
// runs three founders of a cluster for 20 s of kill -9, pauses and partitions (60 s with
// FILA_CHAOS_CLUSTER=1). TestShardedQueueFaultsKeepOrderAndDedup runs three founders, a
// ShardedWorkload on a 4-shard queue ordered by group and KillShardLeader (with pauses) for 15 s,
// judged by the order and duplicate rules besides. make chaos runs it longer
// (cmd/chaos) and prints its figures; docs/chaos.md says how to read them.
package chaos
