package broker

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/throttle"
)

// An actor owns one queue group — a queue and its dead-letter queue, the two lanes of the group —
// as the group's leader: its state (server/queuegroup), its subscriptions and its body cache.
// Every change runs on the actor's goroutine, in rounds:
//
//  1. take one operation, then every other one already waiting (up to maxOpsPerRound);
//  2. run them against the state, which applies each change and records it as a command;
//  3. expire due leases and dispatch ready messages to subscriptions with credit (a lane with
//     committed delivery durability records its leases too);
//  4. propose the round's commands as one entry of the group's Raft log;
//  5. once the entry is durable and applied, answer the operations and send the deliveries.
//
// The actor goes on with the next round while an entry is on its way; the waiter goroutine
// (waitLoop) takes the rounds' futures in order. Raft appends the entries of several rounds with
// one fsync when they queue up, and Pebble shares the fsyncs of concurrent groups.
//
// Nothing is answered or delivered before it is durable. When a proposal fails, every operation of
// that round and of the rounds behind it is answered StorageError, and the actor reloads the group
// from its snapshot and log, so memory never runs ahead of the log for long; the entries behind a
// failed one never apply (queuegroup's Fence).
type actor struct {
	b     *Broker
	name  string
	lanes [2]lane
	st    *queuegroup.State
	g     *raftgroup.Group
	fsm   *queueFSM
	log   *slog.Logger

	ops      inbox   // requests from connections; bounded: full means ChannelFull
	internal opQueue // operations from other goroutines; never refused
	stop     chan struct{}
	done     chan struct{}
	commits  chan *commit  // proposed rounds, waiting for their entries (in order)
	synced   chan struct{} // closed when the waiter has finished every commit
	inflight atomic.Int32  // commits not finished yet

	// dorm is whether the actor hibernates (hibernate.go); lastBusy when it last ran a
	// request (Unix ms); wakeIdx its entry in the broker's sleepers heap (1-based; 0: none),
	// guarded by the heap's lock.
	dorm     dormancy
	wakeB    wakeBound // bounds the wait of requests while the group wakes (wakebound.go)
	lastBusy int64
	wakeIdx  int
	// reads counts the operations of the current batch that only read (quietreads.go): they do
	// not make the round busy.
	reads int

	// leading is whether this node leads the group and the actor runs its leader's runtime
	// (roles.go); leadingNow mirrors it for other goroutines. term is the Raft term it leads in,
	// promotions how many times it took the leadership since it opened, unwatch ends the watch
	// of the group's role.
	leading    bool
	leadingNow atomic.Bool
	term       uint64
	promotions int
	unwatch    func()
	// othersLed is whether this replica saw another node lead the group since it opened
	// (reclaim.go).
	othersLed bool
	// unconfirmed: this leader took the group over without its definitions confirmed current
	// yet, and runs it as the more careful of the two delivery durabilities until they are
	// (reclaim.go, confirmLater); graceFrom is when its takeover's reclaim grace started.
	unconfirmed bool
	graceFrom   int64
	// roleChanged is signalled when the group's role may have changed (watchRole).
	roleChanged chan struct{}
	// replicas are the group's members, as the meta group placed it (its Raft configuration
	// when it has no state yet).
	replicas []meta.NodeID

	reloadQueued  atomic.Bool  // a reload after a failed proposal is waiting to run
	refenceQueued atomic.Bool  // a retake after a fenced-off proposal is waiting to run
	reloads       atomic.Int64 // reloads finished (tests wait on it)
	// suspended: the group's Raft group is stopped because the store refuses writes; the actor
	// answers from the state it holds until the store recovers (storagehealth.go).
	suspended bool

	hooks    queueHooks          // the queue lane's compiled Lua hooks
	attrs    hooks.AttributeSets // attribute maps shared among the queue's messages
	classBuf []classified        // classifyAll's result, reused
	// enqBudget bounds the on_enqueue calls of a round's Enqueue requests, failBudget the
	// on_failure calls of its Nacks and lease expiries (scriptbudget.go).
	enqBudget, failBudget scriptBudget
	reclass               reclassState // the reclassification passes over parked messages (park.go)
	dedupHeld             int          // identities the group is counted for in the node's dedup budget (dedupbudget.go)
	subs                  map[string]*subscription
	bodies                *bodyCache
	batches               batchPool

	// Per-round state.
	replies   []func(err error)
	outbox    []outBatch
	pending   map[*subscription]*deliveryBuf
	leaseBuf  []engine.Lease
	fetched   map[engine.MsgID]body // bodies a throttle's Class read for the current dispatch batch
	idBuf     []engine.MsgID
	lastNow   int64
	deleted   bool
	sinceSnap int // bytes proposed since the last snapshot

	// How many of the round's deliveries have their bodies still to be read (bodyread.go).
	unread int
}

// lane is one queue of the group.
type lane struct {
	name      string
	public    string // the name clients know it by: a sharded queue's shard's is the queue's (sharding.go)
	def       store.QueueRecord
	keys      laneKeys // ordering and deduplication, from def
	m         queueMetrics
	throttles *laneThrottles // nil while no subscription of the lane declares a throttle
}

// subscription is one Consume on a lane of this group.
type subscription struct {
	id        string
	session   string // SubscribeRequest.Session
	since     int64  // Unix ms when it began: a lease older than that is not its own (checkHolder)
	lane      queuegroup.Lane
	sink      Sink
	auto      bool                   // credit managed by the server: the window refills as deliveries reach the socket
	throttles *throttle.Subscription // its throttle declarations; nil for none
}

// outBatch is a batch of deliveries waiting for the round's commit.
type outBatch struct {
	sub        *subscription
	deliveries []Delivery
}

// deliveryBuf accumulates one subscription's deliveries of a round.
type deliveryBuf struct {
	msgs []Delivery
	size int
}

// batchPool recycles delivery batches: taken on the actor's goroutine, given back by the waiter
// once the sink has taken what it needs.
type batchPool struct {
	mu   sync.Mutex
	free [][]Delivery
}

func (p *batchPool) get() []Delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s
	}
	return make([]Delivery, 0, 16)
}

func (p *batchPool) put(s []Delivery) {
	clear(s)
	if cap(s) > maxDispatchPerRound {
		return
	}
	p.mu.Lock()
	if len(p.free) < 64 {
		p.free = append(p.free, s[:0])
	}
	p.mu.Unlock()
}

const (
	maxOpsPerRound      = 1024
	maxDispatchPerRound = 2048
	autoCreditWindow    = 1024
	deliveryBatchBytes  = 1 << 20 // a subscription's batch is handed over once about this big
	// A group snapshots its state, and truncates its log behind it, once the log since the last
	// snapshot is both long (snapshotBytes, snapshotEntries) and several times what the snapshot
	// costs to write (snapshotRatio × messages × snapshotBytesPerMessage): the log then stays
	// bounded by a multiple of the state, and writing snapshots costs a bounded fraction of the
	// appends however large the backlog.
	snapshotBytes           = 64 << 20
	snapshotEntries         = 8192
	snapshotRatio           = 16
	snapshotBytesPerMessage = 80
	leadTimeout             = time.Minute
)

// newActor makes the actor of the group of queue def (dlq is its dead-letter queue's definition);
// open starts its Raft group.
func newActor(b *Broker, def, dlq store.QueueRecord) *actor {
	a := &actor{
		b:       b,
		name:    def.Name,
		log:     b.log.With("queue", def.Name),
		ops:     inbox{max: b.opts.InboxSize, wake: make(chan struct{}, 1)},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		subs:    map[string]*subscription{},
		bodies:  newBodyCache(b.opts.BodyCacheBytes, &b.cacheBytes),
		pending: map[*subscription]*deliveryBuf{},
	}
	a.lanes[queuegroup.LaneQueue] = lane{name: def.Name, public: publicName(&def), def: def, m: b.metrics.forQueue(def.Name)}
	a.lanes[queuegroup.LaneDeadLetter] = lane{name: dlq.Name, public: publicName(&dlq), def: dlq, m: b.metrics.forQueue(dlq.Name)}
	for l := range a.lanes {
		k, err := parseLaneKeys(&a.lanes[l].def)
		if err != nil { // checked at creation: the stored definition is damaged
			a.log.Error("the queue's ordering or dedup key does not decode; ignoring it", "lane", l, "err", err)
		}
		a.lanes[l].keys = k
	}
	a.internal.wake = make(chan struct{}, 1)
	a.roleChanged = make(chan struct{}, 1)
	return a
}

// open starts the group's Raft group, replays its snapshot and log, waits until its role is
// known, and takes the state over when this node leads (roles.go).
func (a *actor) open() error {
	st, err := queuegroup.New(a.lanes[0].name, a.lanes[1].name, a.engineConfig(0), a.engineConfig(1))
	if err != nil {
		return err
	}
	fsm, err := newQueueFSM(a.b.db, a.name, st, a.log)
	if err != nil {
		return err
	}
	fsm.onSleep = func() { signal(a.internal.wake) } // sleepreplicas.go
	g, err := a.b.openGroup(a.name, fsm, a.replicas)
	if err != nil {
		return err
	}
	a.g, a.fsm = g, fsm
	a.promotions, a.othersLed = 0, false
	a.watchRole() // before the role is read: a change after the read is heard (followRole)
	if err := a.settleRole(); err != nil {
		a.unwatch()
		a.unwatch = nil
		_ = g.Shutdown()
		a.g, a.fsm = nil, nil
		return err
	}
	return nil
}

// engineConfig resolves lane l's definition against the broker defaults.
func (a *actor) engineConfig(l queuegroup.Lane) engine.Config {
	return a.b.engineConfig(&a.lanes[l].def)
}

// syncConfig sets whether lane l logs its leases, and records a Configure when a lane's engine runs another configuration than its
// definition and the defaults give (after UpdateQueue, SetConfig, or a restart in between).
func (a *actor) syncConfig(l queuegroup.Lane) {
	a.st.LogLeases(l, a.committed(l))
	cfg := a.engineConfig(l)
	cfg.Alloc = a.st.Lane(l).Config().Alloc // where the lane keeps its memory is no configuration
	if a.st.Lane(l).Config() == cfg {
		return
	}
	if err := a.st.Configure(l, cfg); err != nil {
		a.log.Error("invalid queue configuration; keeping the current one", "lane", l, "err", err)
	}
}

func (a *actor) reclaimGrace() uint64 {
	if g := a.lanes[queuegroup.LaneQueue].def.ReclaimGraceMs; g > 0 {
		return g
	}
	return a.b.currentDefaults().ReclaimGraceMs
}

// call runs f on the actor and waits for it, for admin requests that need an answer. It returns
// false when the actor has stopped.
func (a *actor) call(f func(a *actor)) bool {
	ch := make(chan bool, 1)
	a.post(func(a *actor) {
		if !a.leading {
			ch <- false // a follower holds no state to run f on (roles.go)
			return
		}
		f(a)
		ch <- true
	})
	select {
	case ok := <-ch:
		return ok
	case <-a.done:
		return false
	}
}

// commitCall runs f on the actor and waits until the round it ran in is durable; it returns f's
// failure, or StorageError when the round's entry failed, and false when the actor has stopped.
func (a *actor) commitCall(f func(a *actor) *Error) (*Error, bool) {
	ch := make(chan *Error, 1)
	a.post(func(a *actor) {
		if !a.leading {
			ch <- errorf(CodeNotLeader, "this node does not lead queue %q", a.name)
			return
		}
		if e := f(a); e != nil {
			ch <- e
			return
		}
		a.afterCommit(func(err error) {
			if err != nil {
				ch <- a.b.failure(err)
				return
			}
			ch <- nil
		})
	})
	select {
	case e := <-ch:
		return e, true
	case <-a.done:
		return nil, false
	}
}

func (a *actor) now() int64 {
	now := a.b.clock().UnixMilli()
	if now < a.lastNow {
		now = a.lastNow // the engine needs non-decreasing times
	}
	a.lastNow = now
	return now
}

// start runs the actor of a group just opened.
func (a *actor) start() {
	a.lastBusy = a.b.clock().UnixMilli()
	a.b.awake.Add(1)
	go a.run()
}

// run is the actor's goroutine: rounds until the group is deleted, the broker closes, or the
// group hibernates (hibernate.go).
func (a *actor) run() {
	timer := a.b.opts.NewTimer(time.Hour)
	defer timer.Stop()
	a.arm(timer) // a group woken for a due change runs it at once
	var batch []op
	for {
		batch = batch[:0]
		select {
		case <-a.ops.wake:
		case <-a.internal.wake:
		case <-timer.C():
		case <-a.roleChanged:
			a.followRole()
		case <-a.stop:
			a.storeSummaryAtClose()
			a.stopped()
			return
		}
		a.reads = 0
		// Internal operations run first, on their own: one may change the role (a retake
		// demotes), and the requests are taken only as the role then is.
		batch = a.internal.take(batch)
		for _, o := range batch {
			o(a)
		}
		internal := len(batch)
		clear(batch)
		batch = batch[:0]
		if a.leading {
			batch = a.ops.take(batch, max(maxOpsPerRound-internal, 1))
		} else {
			a.ops.refuseWaiting(CodeNotLeader)
		}
		a.round(batch)
		busy := internal+len(batch) > a.reads // reads that change nothing are no activity (quietreads.go)
		clear(batch)
		if a.deleted {
			a.stopped()
			return
		}
		if !a.suspended && a.leading {
			a.maybeSnapshot()
			a.noteStored()
		}
		if a.sleepAsked() {
			return // a replicated group's Hibernate entry applied (sleepreplicas.go)
		}
		if now := a.b.clock().UnixMilli(); busy {
			a.lastBusy = now
		} else if a.idleSince(now) {
			if a.drowsy() && a.sleep() {
				return
			}
			a.lastBusy = now // not now (something needs it awake): look again after another idle time
		}
		a.arm(timer)
	}
}

// stopped ends an actor that stops for good.
func (a *actor) stopped() {
	a.shutdown()
	if a.st != nil {
		a.st.Release() // the group is stopped: nothing reads its state any more
	}
	a.countDedup(0)
	a.b.awake.Add(-1)
	a.end()
}

// nextWakeup is the time of the group's next self-driven change (Unix ms), if any: none while
// it follows (the leader decides every change).
func (a *actor) nextWakeup() (int64, bool) {
	if !a.leading {
		return 0, false
	}
	next, ok := a.st.NextForget()
	for l := range a.lanes {
		if at, has := a.st.Lane(queuegroup.Lane(l)).NextWakeup(); has && (!ok || at < next) {
			next, ok = at, true
		}
	}
	if a.reclass.next != 0 && (!ok || a.reclass.next < next) {
		next, ok = a.reclass.next, true
	}
	if at, has := a.retentionWakeup(); has && (!ok || at < next) {
		next, ok = at, true
	}
	return next, ok
}

// arm sets the timer to the group's next self-driven change, or to when it may hibernate.
func (a *actor) arm(t Timer) {
	next, ok := a.nextWakeup()
	if a.mayHibernate() {
		if at := a.lastBusy + a.b.opts.IdleTimeout.Milliseconds(); !ok || at < next {
			next, ok = at, true
		}
	}
	d := time.Hour
	if ok {
		d = max(time.Duration(next-a.b.clock().UnixMilli())*time.Millisecond, 0)
	}
	if d < failingRecheck && (a.suspended || a.b.db.Health().Err != nil) {
		// A round skips what needs a write while writes fail (expiry, forgetting), so what is
		// due stays due: look again later, not at once round after round. The store's
		// recovery wakes every actor (watchStorage).
		d = failingRecheck
	}
	t.Reset(d)
}

// failingRecheck is how often an actor looks at what came due while the store refuses writes.
const failingRecheck = time.Second

// commit is one round on its way to durability: its entry's future, the replies waiting for it
// and the deliveries to hand over once it is durable.
type commit struct {
	future  raft.ApplyFuture // nil when the round changed nothing
	replies []func(err error)
	outbox  []outBatch
	bodies  int64          // the body cache's end when the round was proposed
	reads   *bodyRead      // the outbox's bodies being read from storage meanwhile; nil when none
	fence   queuelog.Fence // the entry's (fate.go)
}

// round runs one batch of operations, then expiry and dispatch, then proposes the round's entry
// and hands it to the waiter: the actor goes on with the next round meanwhile. While the store
// refuses writes, nothing that would need a write runs (expiry, forgetting, the dispatch of
// lanes that log their leases), and a round that changed something anyway is answered
// StorageError and discarded with a reload.
func (a *actor) round(batch []op) {
	for _, o := range batch {
		o(a)
	}
	if !a.leading {
		return // a follower runs no round: the leader decides every change
	}
	a.enqBudget.end()
	failing := a.suspended || a.b.db.Health().Err != nil
	if !a.deleted {
		now := a.now()
		if !failing {
			a.st.Forget(now)
			a.reclassifyIfDue(now)
			for l := range a.lanes {
				a.expire(queuegroup.Lane(l), now)
			}
		}
		for l := range a.lanes {
			// Promote what became due even when nothing can be delivered (no subscription):
			// a due delayed message otherwise stays the next wake-up, and the timer fires at
			// once, round after round.
			a.st.Lane(queuegroup.Lane(l)).Advance(now)
			if !failing || !a.committed(queuegroup.Lane(l)) {
				a.dispatch(queuegroup.Lane(l), now)
			}
		}
	}
	a.failBudget.end()
	if !a.deleted {
		a.countDedup(a.st.Remembered())
	}
	entry := a.st.TakeEntry()
	if entry == nil && len(a.replies) == 0 && len(a.outbox) == 0 {
		return
	}
	c := &commit{replies: a.replies, outbox: a.outbox, bodies: a.bodies.end(), reads: a.readBodies(a.outbox)}
	a.replies, a.outbox = nil, nil
	if failing {
		a.finishUnlogged(c, entry != nil)
		return
	}
	if entry != nil {
		c.future, c.fence = a.g.Propose(entry), a.st.Fence()
		a.sinceSnap += len(entry)
	}
	a.inflight.Add(1)
	a.commits <- c
	a.bodies.trim(a.st.Lane(queuegroup.LaneQueue).Len())
}

// finishUnlogged finishes a round while the store refuses writes, on the actor's goroutine: a
// round that needs no entry succeeds; one that changed the state is answered StorageError and
// the state is reloaded (when the store accepts writes again).
func (a *actor) finishUnlogged(c *commit, changed bool) {
	a.awaitBodies(c)
	if !changed {
		a.bodies.applied(c.bodies)
		for _, reply := range c.replies {
			reply(nil)
		}
		a.flushOutbox(c.outbox)
		return
	}
	err := a.b.db.Health().Err
	if err == nil {
		err = errReloaded
	}
	for _, reply := range c.replies {
		reply(err)
	}
	for i := range c.outbox {
		a.batches.put(c.outbox[i].deliveries)
	}
	a.reload()
}

// waitLoop waits for each proposed round's entry, in order, then answers its requests and sends
// its deliveries. A failed entry answers StorageError and has the actor reload the group.
//
// Once a round's entry has failed, the leader's state holds what the log may never hold: the
// round was applied to it before it was proposed. A later round with an entry fails on its own
// (its Fence does not follow the log's), but a round without one — a repeat answered from the
// state as a duplicate, a delivery of a message the log lacks — would be answered as if the state
// were the log's. Such rounds are answered as the failed one was (stale, below) until the actor
// builds its state again from the log (a demotion, a retake or a reload ends this loop).
func (a *actor) waitLoop() {
	defer close(a.synced)
	var stale error // why an earlier round's entry failed; nil while every one committed
	for c := range a.commits {
		var err error
		switch {
		case c.future != nil:
			start := time.Now()
			err = c.future.Error()
			if err == nil {
				if e, ok := c.future.Response().(error); ok {
					err = e
				}
			}
			a.b.metrics.commitSeconds.Observe(time.Since(start).Seconds())
			if err != nil && stale == nil {
				stale = err
			}
		case stale != nil:
			a.abandon(c, stale)
			a.inflight.Add(-1)
			continue
		}
		if err == nil {
			a.bodies.applied(c.bodies)
		}
		a.finish(c, err)
		a.inflight.Add(-1)
	}
}

// abandon answers a round without an entry that was decided on a state an earlier failed
// round (failed with cause) had changed: NotLeader when the leadership was lost or is being
// handed on (the client sends again, to whichever node leads, and a repeat with an idempotency
// key is then answered from the log), cause itself otherwise. Its deliveries are not sent: the
// state they were leased from is being built again from the log.
func (a *actor) abandon(c *commit, cause error) {
	err := cause
	if leadershipLost(cause) {
		err = errNotLeader
	}
	for _, reply := range c.replies {
		reply(err)
	}
	a.awaitBodies(c)
	for i := range c.outbox {
		a.batches.put(c.outbox[i].deliveries)
	}
}

// finish answers a round's requests and, when it is durable, sends its deliveries.
func (a *actor) finish(c *commit, err error) {
	if i, ok := a.deposedEntry(c, err); ok {
		a.settleDeposed(c, i) // its entry may still commit: answered by its fate (fate.go)
		return
	}
	for _, reply := range c.replies {
		reply(err)
	}
	a.awaitBodies(c)
	if err == nil {
		a.flushOutbox(c.outbox)
		return
	}
	if errors.Is(err, errFenced) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		// Fenced: another leader's entries applied before this one: this node was deposed and
		// perhaps elected again, and the state this entry was built on lacks them. Refused during
		// a transfer: the state holds this round, the log never will, and the node may go on
		// leading if the transfer fails. Either way demote (the state is built again from the
		// log) and take the leadership again if it is still here (while the transfer lasts the
		// actor follows and looks again every transferRecheck: roles.go).
		if !a.refenceQueued.Swap(true) {
			a.post(func(a *actor) { a.refenceQueued.Store(false); a.retake() })
		}
		return
	}
	if leadershipLost(err) {
		return // the role watch demotes the actor (roles.go): nothing to reload
	}
	a.log.Error("proposing to the queue's log failed; reloading the queue", "err", err)
	if !a.reloadQueued.Swap(true) { // one reload covers every round failed before it runs
		a.post(func(a *actor) { a.reload(); a.reloadQueued.Store(false) })
	}
}

// afterCommit registers a reply to run once the round's entry is durable (err nil) or failed.
// It runs on the waiter's goroutine: it must not touch actor state.
func (a *actor) afterCommit(f func(err error)) { a.replies = append(a.replies, f) }

// flushOutbox hands a durable round's deliveries to their sinks. It runs on the waiter's goroutine.
func (a *actor) flushOutbox(outbox []outBatch) {
	for i := range outbox {
		f := &outbox[i]
		sub := f.sub
		var onWritten func()
		if sub.auto && len(f.deliveries) > 0 {
			n := uint32(len(f.deliveries))
			onWritten = func() {
				a.postAwake(func(a *actor) {
					if a.subs[sub.id] == sub {
						_ = a.st.Lane(sub.lane).AddCredit(sub.id, n)
					}
				})
			}
		}
		ok := handOver(sub.sink, f.deliveries, onWritten)
		a.batches.put(f.deliveries)
		f.deliveries = nil
		if !ok {
			a.postAwake(func(a *actor) { a.dropSubscription(sub) })
		}
	}
}

func (a *actor) dropSubscription(sub *subscription) {
	if a.subs[sub.id] == sub {
		delete(a.subs, sub.id)
		_ = a.st.Lane(sub.lane).Unsubscribe(sub.id)
		a.dropThrottles(sub)
	}
}

// drain waits until every proposed round has finished.
func (a *actor) drain() {
	for a.inflight.Load() > 0 {
		time.Sleep(50 * time.Microsecond)
	}
}

// maybeSnapshot snapshots the group once enough was proposed since the last snapshot, when
// nothing is in flight (the state then equals the log's applied state).
func (a *actor) maybeSnapshot() {
	first, last := a.g.Stats()
	msgs := uint64(a.st.Lane(0).Len() + a.st.Lane(1).Len())
	cost := snapshotRatio * snapshotBytesPerMessage * msgs
	bytesDue := uint64(a.sinceSnap) >= max(snapshotBytes, cost)
	entriesDue := last-first >= max(snapshotEntries, snapshotRatio*msgs)
	if !bytesDue && !entriesDue || a.fsm.writing.Load() {
		return
	}
	a.drain()
	if a.fsm.failed.Load() {
		return // a reload is on its way
	}
	a.unparkAll() // parked messages are live state; the snapshot sees them in their FIFOs
	start := time.Now()
	if err := a.snapshot(); err != nil {
		a.log.Error("snapshot failed", "err", err)
		return
	}
	a.sinceSnap = 0
	took := time.Since(start)
	a.lanes[0].m.snapshotSeconds.Observe(took.Seconds())
	a.log.Debug("snapshot", "took", took, "messages", a.st.Lane(0).Len()+a.st.Lane(1).Len())
}

// noteStored tells the store how many messages the group holds, which decides how it lays out
// the group's bodies (storage.Layout).
func (a *actor) noteStored() {
	if a.b.layout != nil {
		a.b.layout.Stored(a.lanes[0].name, a.st.Lane(0).Len()+a.st.Lane(1).Len())
	}
}

// shutdown ends every subscription and stops the group; its state stays in the log. The
// subscriptions of a deleted group hear that it was deleted (Sink.Ended).
func (a *actor) shutdown() {
	a.stopGroup()
	for _, sub := range a.subs {
		if sub.throttles != nil {
			sub.throttles.Close()
		}
		if a.deleted {
			sub.sink.Ended(errorf(CodeQueueNotFound, "queue %q was deleted", a.lanes[sub.lane].name))
		}
	}
	if a.deleted {
		for _, l := range a.lanes {
			a.b.metrics.drop(l.name)
		}
	}
}

// stopGroup waits for the rounds in flight and stops the Raft group, if it runs.
func (a *actor) stopGroup() {
	if a.g == nil {
		return
	}
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch = nil
	}
	if a.leading {
		a.drain()
		close(a.commits)
		<-a.synced
	}
	a.bodies.clear()
	if err := a.g.Shutdown(); err != nil {
		a.log.Error("stopping the queue's log failed", "err", err)
	}
	a.g = nil
}

// errReloaded answers the operations of a round cut short by a reload.
var errReloaded = errors.New("broker: the queue reloaded after a failed append")

// reload rebuilds the group from its snapshot and log after a failed proposal. While the store
// refuses writes it only stops the group and suspends the actor: watchStorage resumes it.
func (a *actor) reload() {
	a.stopGroup()
	// Operations earlier in this round changed the state being discarded: nothing of theirs will
	// be durable, so they are answered as their round would have been.
	for _, reply := range a.replies {
		reply(errReloaded)
	}
	a.replies, a.outbox = nil, nil
	a.resume()
}

// resume opens the stopped group again, retrying while it fails for another reason than the
// store refusing writes (then the actor stays suspended); the requests waiting meanwhile are
// answered StorageError after each failed attempt.
func (a *actor) resume() {
	defer a.reloads.Add(1)
	for {
		if a.b.db.Health().Err != nil {
			a.suspended = true
			return
		}
		err := a.openRefusing()
		if err == nil {
			break
		}
		a.log.Error("reloading the queue failed; retrying", "err", err)
		a.ops.refuseWaiting(CodeStorageError) // none waits for a group that may never open
		select {
		case <-a.stop:
			a.suspended = true
			return
		case <-time.After(time.Second):
		}
	}
	a.suspended = false
	if !a.leading {
		return // reopened as a follower: settleRole ended the subscriptions
	}
	for id, sub := range a.subs {
		credit := uint32(0)
		if sub.auto {
			credit = autoCreditWindow
		}
		_ = a.st.Lane(sub.lane).Subscribe(id, credit)
	}
	a.reinstallThrottles()
}
