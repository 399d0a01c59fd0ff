// Package engine is the broker's queue engine: a pure, deterministic state machine per queue
// holding the in-memory index of stored messages, the Deficit Round Robin scheduler over their
// fairness keys, leases, and the credit of live subscriptions (concepts.md).
//
// Like etcd-io/raft's RawNode, it has no goroutines, timers, sockets, disks or clock: commands
// go in, effects come out, and time is always an argument (Unix milliseconds). The broker owns
// every I/O: it assigns message IDs and timestamps, persists commands, sends frames, and arms
// one timer per queue at NextWakeup.
//
// # Driving a Queue
//
//   - Enqueue: build an Enqueue command (IDs, times, defaults decided), persist it, ApplyEnqueue.
//   - Deliver: Subscribe / AddCredit as consumers ask; call Dispatch(now, max, buf) whenever
//     messages, credit or time may have made deliveries possible; persist the returned Lease
//     commands (committed durability) and send them, reading the message fields with Get.
//   - Ack / Nack / ExtendLease: CheckLease, then Ack{ID}; DecideFailure then ApplyFail;
//     DecideExtend then ApplyExtend.
//   - Timer: at NextWakeup, for each id in Expired(now): DecideFailure(id, now, "lease
//     expired", nil) and ApplyFail; then Dispatch(now, ...).
//   - Dead-lettering: ApplyFail with DeadLetter returns the message's last state; enqueue
//     DeadLetterCopy of it into the "<name>.dlq" Queue. Redrive: take Oldest(n) of the DLQ,
//     ApplyRemove each there and enqueue RedriveCopy of it into the parent.
//   - Restart: NewQueue, then Apply every persisted command in order.
//
// Commands are deterministic (see Command): replaying the same sequence on a fresh Queue gives
// the same messages, leases, DRR deficits and round order, hence the same future deliveries.
// Decisions that need policy, scripts or the clock are made beforehand by Dispatch,
// DecideFailure and DecideExtend, which is where a Raft leader will run them before proposing.
// Subscriptions and credit are live, per-node state and are not commands.
//
// # Data layout
//
// A stored message is a 64-byte pointer-free record (see rec) in a chunked slab, so ten
// million queued messages are a few hundred chunks the garbage collector never scans. Headers
// and payload live in a side table only for messages that have them, the last error in a side
// map only for messages that failed. Records are linked by uint32 indices into three
// structures: the per-key FIFO of ready messages (an intrusive doubly-linked list: O(1) append,
// pop and removal from the middle, no per-key buffers, no slack), the queue's enqueue order
// (for Oldest and Messages), and the free list. An open-addressing table (idIndex) maps IDs to
// records at 8 bytes per entry. Delayed messages and leases sit in indexed binary heaps, so
// promotion, expiry, Extend and Ack are O(log n) and Expired is O(k) for k results. The DRR
// active set and the rotation of subscriptions are rings of indices: a turn passes in O(1)
// and nothing scans all keys or all messages. Dispatch allocates nothing but the growth of the
// caller's slice.
//
// # Scheduling
//
// Keys with ready messages form the DRR round, in the order they became active; the head has
// the turn. When a key's turn begins it receives weight × quantum deficit; each delivery costs
// 1; when the deficit is spent the turn passes on, and a key left without ready messages leaves
// the round and its deficit is reset. All of it happens when a Lease is applied (Queue.lease),
// so replayed leases rebuild the scheduler exactly. Deliveries rotate over the subscriptions
// with credit one by one; a subscription out of credit leaves the rotation until AddCredit.
//
// # Seams for later features
//
// These are not implemented; the places they fit are:
//
//   - Throttles: pick is the single place that decides what is deliverable, and
//     pickAdmitted already runs a per-(subscription, message) admission check (Queue.admit)
//     that passes over refused pairs without charging or reordering them, so an undeliverable
//     message never blocks a deliverable one. Buckets would be charged where Dispatch calls
//     spend; "throttled" would be counted by the check. To look past a key's head, a key's FIFO
//     would split into one FIFO per (key, bucket).
//   - Ordering groups: the per-key FIFO would hold group heads instead of messages (a group
//     joins its key's FIFO when its head becomes ready, and leaves it while the head is
//     leased, delayed or retrying); makeReady, lease and ApplyFail/schedule are the places
//     where a message enters and leaves the ready set. A retried head keeps its place.
//   - Deduplication: checkNew is where an Enqueue's identities would be checked against a
//     time-ordered dedup index owned by the Queue (identities would be fields of Message and
//     expiry a timer in NextWakeup); duplicates would be reported per message, not refused.
//   - Parked (unclassified) messages: a fourth stored state beside ready/delayed/leased (rec
//     has room for it in meta), counted in depth, in no FIFO, with a reclassify command moving
//     it through schedule.
//   - Fast delivery durability: Dispatch already applies leases without waiting for the
//     broker, which simply would not persist them. The reclaim grace after a failover would be a
//     queue-wide "hold until" time checked in pick, with Extend allowed to re-lease a held
//     ready message.
//   - FailurePolicy is the hook for the on_failure Lua script.
package engine
