// Package engine is the broker's queue engine: a pure, deterministic state machine per queue
// holding the in-memory index of stored messages, the Deficit Round Robin scheduler over their
// fairness keys, leases, and the credit of live subscriptions (concepts.md).
//
// Like etcd-io/raft's RawNode, it has no goroutines, timers, sockets, disks or clock, and it
// imports only the standard library (TestImportsOnlyTheStandardLibrary): commands go in, effects
// come out, and time is always an argument (Unix milliseconds). The broker owns every I/O: it
// assigns message IDs and timestamps, persists commands, sends frames, and arms one timer per
// queue at NextWakeup. Memory outside the Go heap is an Allocator's, given in Config.Alloc
// (fila-server's maps it and backs it with scratch files: server/offheap); without one a Queue
// takes everything from the Go heap.
//
// # Driving a Queue
//
//   - Enqueue: build an Enqueue command (IDs, times, defaults decided), persist it, ApplyEnqueue.
//   - Deliver: Subscribe / AddCredit as consumers ask; call Dispatch(now, max, buf) whenever
//     messages, credit or time may have made deliveries possible; persist the returned Lease
//     commands (committed durability) and send them, reading the message fields with Get.
//   - Ack / Nack / ExtendLease: CheckLease, then Ack{ID}; DecideFailure then ApplyFail;
//     DecideExtend (setting Extend.Consumer) then ApplyExtend.
//   - Timer: at NextWakeup, for each id in Expired(now): DecideFailure(id, now, "lease
//     expired", nil) and ApplyFail; then Dispatch(now, ...).
//   - Queue limits (the broker's retention and max_depth): AcceptedBy(now − retention) or
//     OldestUnleased(excess, walk) name the messages; for each, a Fail with DeadLetter (Attempts
//     unchanged) and ApplyFail, in any state. OldestAcceptedAt + retention is a wake-up.
//   - Dead-lettering: ApplyFail with DeadLetter returns the message's last state; enqueue
//     DeadLetterCopy of it into the "<name>.dlq" Queue. Redrive: take Oldest(n) of the DLQ,
//     ApplyRemove each there and enqueue RedriveCopy of it into the parent.
//   - Snapshot: Messages, then SnapshotKeys with the ReadyOrder of each key, at a command
//     boundary (the log index the snapshot covers).
//   - Dropping a Queue (deleted, hibernated, reloaded, closed): Release, which gives its
//     Allocator's memory back at once; a Queue collected without it gives the memory back then,
//     from a cleanup (runtime.AddCleanup) on the runtime's goroutine.
//   - Restart (or a replica catching up): a Restorer fed the latest snapshot (NewRestorer,
//     AddMessage for every message, AddKey and AddReady for every key, Queue), then Apply of
//     every command logged after it, in order. Without a snapshot: NewQueue, then Apply of
//     every command.
//
// Commands are deterministic (see Command): replaying the same sequence on a fresh Queue, or on
// a queue restored from a snapshot of an earlier point, gives the same messages, leases, DRR
// deficits and round order, hence the same future deliveries. Every order the engine reports or
// acts on is canonical — enqueue order, round order, FIFO order, and ties on time (promotion,
// expiry) broken by message ID, never by where a message happens to be stored. Decisions that
// need policy, scripts or the clock are made beforehand by Dispatch, DecideFailure and
// DecideExtend, which is where a Raft leader runs them before proposing. Subscriptions, credit
// and holds are live, per-node state: they are not commands and are in no snapshot.
//
// # Delivery durability
//
// With committed durability the broker logs the Lease commands Dispatch returns before sending
// the deliveries, and a replica or replay knows every lease. With fast durability it logs
// only Enqueue, Ack, Fail, Remove and UpdateConfig: a replica or replay sees a delivered
// message as ready (or delayed), and ApplyAck and ApplyFail accept it in any state; Fail
// carries the attempt count decided on the leader, so every copy counts the same. A leader that
// takes over a fast queue cannot know what its predecessor leased, so it calls Hold(now, now +
// reclaim grace): every ready message is held back from delivery, while Ack, Nack
// (CheckLease, DecideFailure) and ExtendLease (which leases a held message to the consumer
// asking) work on held messages; when the grace ends they become ready again, in enqueue
// order, without an attempt counted.
//
// # Data layout
//
// A stored message is a 64-byte pointer-free record (see rec) in a chunked slab, so ten
// million queued messages are a few hundred chunks the garbage collector never scans; full
// chunks, ID-index chunks and big ID-index tables come from the Queue's Allocator when it gives
// them (alloc.go). fila-server's maps them outside the Go heap, so the collector's headroom does
// not double them in RSS, and makes the sweepable ones — the record chunks and the ordered
// ID-index chunks, touched in a few places at a time — regions of scratch files whose pages it
// sweeps from RSS into the page cache; the side ID table, read at random, is not sweepable.
// Headers and payload live in a side table only for messages that have them, the last error in a side
// map only for messages that failed. Records are linked by uint32 indices into three
// structures: the per-key FIFO of ready messages (an intrusive doubly-linked list: O(1) append,
// pop and removal from the middle, no per-key buffers, no slack), or for a held message the
// per-key held list in enqueue order (held is a state of rec, not a side map); the queue's
// enqueue order (for Oldest, Messages, Hold and its release); and the free list. The ID index
// (msgIndex, ordindex.go) maps IDs to records: an ID greater than every stored one — the common
// case, broker IDs being UUIDv7 that increase within a process — is appended to sorted chunks of
// (8-byte ID prefix, slot) entries, 12 bytes each, found by binary search and touched only near
// the IDs in use (the front and the tail under FIFO consumption), so the rest can be swept out of
// memory; an older ID (dead-letter and redrive copies, another leader's IDs, a clock gone back)
// goes to a second such index if it is greater than every ID there (a redrive's copies come in
// the order they died, mostly ID order), and any other to a side open-addressing table (idIndex)
// at 8 bytes per bucket. Delayed messages
// and leases sit in indexed binary heaps, so promotion, expiry, Extend and Ack are O(log n) and
// Expired is O(k log k) for k results; equal times are ordered by message ID, read from the
// records only on a tie. The DRR active set and the rotation of subscriptions are rings of
// indices: a turn passes in O(1), and only Hold, its release and snapshots walk all messages.
// Dispatch allocates nothing but the growth of the caller's slice. A Restorer builds the same
// structures from a snapshot with nothing more than O(keys) on the side.
//
// # Scheduling
//
// Keys with ready messages form the DRR round, in the order they became active; the head has
// the turn. When a key's turn begins it receives weight × quantum deficit; each delivery costs
// 1; when the deficit is spent the turn passes on, and a key left without ready messages leaves
// the round and its deficit is reset. All of it happens when a Lease is applied (Queue.lease),
// so replayed leases rebuild the scheduler exactly. Held messages are in no FIFO, so a key with
// only held messages is out of the round until the release. Deliveries rotate over the
// subscriptions with credit one by one; a subscription out of credit leaves the rotation until
// AddCredit.
//
// # Ordering groups
//
// A message enqueued with Grouped set belongs to the ordering group Group (the broker evaluates
// the queue's ordering key on the leader and the Enqueue command carries the result). Only the
// oldest stored message of a group — its head — is ever ready, delayed, held or leased; the others
// wait in no FIFO, heap or ring, so the DRR FIFOs hold group heads beside unordered messages and
// picking a delivery never looks at groups. When the head is acked, dead-lettered or removed, the
// next message becomes the head and is scheduled at that command's time (so Ack carries a time); a
// retried head stays the head. A group costs nothing once its last message is gone (ordering.go).
//
// # Admission (throttles)
//
// A Queue may have an Admission (SetAdmission): the broker's throttles. Dispatch then offers a
// key's head to the subscriptions with credit in turn and delivers it to the first that admits
// it (admitting counts the delivery in the throttle's buckets). Messages fall into classes
// (for throttles, the tuple of their buckets); a head nobody admits is parked with its class
// until the time the Admission gave, and heads of a parked class join it without being asked
// about, so a throttled backlog costs O(1) per message once, never blocks other keys, classes
// or subscriptions, and waits in its order. When the time comes, the class's oldest message
// goes back to the front of its key's FIFO as a probe; each delivered probe sends the next one
// out, a refused one parks the class again (park.go). Parking is live state, like
// subscriptions: the broker calls Unpark before a snapshot.
//
// # Seams for later features
//
// These are not implemented; the places they fit are:
//
//   - Deduplication: checkNew is where an Enqueue's identities would be checked against a
//     time-ordered dedup index owned by the Queue (identities would be fields of Message and
//     expiry a timer in NextWakeup); duplicates would be reported per message, not refused.
//
// # Lua hooks
//
// The engine runs no script. What on_enqueue decided arrives in the Enqueue command (fairness
// key, weight, not-before time, Attributes); a message whose script failed on a parking queue is
// stored unclassified and parked until a Classify command (unclassified.go). on_failure is the
// queue's FailurePolicy, asked by DecideFailure where the Fail command is made.
package engine
