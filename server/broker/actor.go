package broker

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// An actor owns one queue: its engine state, its subscriptions and its body cache. Every change
// runs on the actor's goroutine, in rounds:
//
//  1. take one operation, then every other one already waiting (up to maxOpsPerRound);
//  2. run them against the engine, collecting their writes in one storage batch;
//  3. expire due leases and dispatch ready messages to subscriptions with credit (leases are
//     written too, for committed delivery durability);
//  4. commit the batch — one fsync for the whole round (group commit);
//  5. answer the operations and send the deliveries.
//
// A round that holds only acks, nacks and extensions (no enqueue, no delivery) is written without
// an fsync of its own: its answers wait until a later round's fsync covers it, or until
// Options.SettleSyncDelay passes and the sync waiter fsyncs. Otherwise a consumer's ack, sent
// just before the next enqueue arrives, would start an fsync that the enqueue has to wait out
// before its own.
//
// Nothing is answered or delivered before it is durable. When a commit fails, every operation of
// the round is answered StorageError and the actor reloads its state from storage, so memory never
// runs ahead of disk.
type actor struct {
	b    *Broker
	name string
	def  store.QueueRecord
	eng  *engine.Queue
	log  *slog.Logger
	m    queueMetrics

	ops      chan op // requests from connections; bounded: full means ChannelFull
	internal opQueue // operations from other actors and callbacks; never refused
	stop     chan struct{}
	done     chan struct{}
	commits  chan *commit  // rounds applied to storage, waiting for their sync (in order)
	synced   chan struct{} // closed when the sync waiter has finished every commit

	reloadQueued atomic.Bool // a reload after a failed commit is waiting to run

	subs   map[string]*subscription
	bodies bodyCache
	p      persistence
	dedup  dedupMemory
	// claimed holds the reclaim holds (see reclaimConsumer) that a consumer extended.
	claimed map[engine.MsgID]struct{}

	// Per-round state.
	batch    *storage.Batch
	replies  []func(err error)
	urgent   bool // a reply of this round must not wait for a later round's fsync
	outbox   []outFrame
	pending  map[*subscription]*deliveryBuf
	leaseBuf []engine.Lease
	msgBuf   []engine.Message
	fetchIDs []storage.ID
	fetched  map[engine.MsgID]body // bodies read ahead for the current dispatch batch
	rec      store.MessageRecord
	idBuf    []engine.MsgID
	lastNow  int64
	deleted  bool
}

// op is one operation run on the actor's goroutine.
type op func(a *actor)

// opQueue is an unbounded queue of operations with a wake-up signal.
type opQueue struct {
	mu   sync.Mutex
	ops  []op
	wake chan struct{}
}

func (q *opQueue) push(o op) {
	q.mu.Lock()
	q.ops = append(q.ops, o)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *opQueue) take(dst []op) []op {
	q.mu.Lock()
	dst = append(dst, q.ops...)
	clear(q.ops)
	q.ops = q.ops[:0]
	q.mu.Unlock()
	return dst
}

// subscription is one Consume on this queue.
type subscription struct {
	id        string
	requestID uint32
	sink      Sink
	auto      bool // credit managed by the server: the window refills as deliveries reach the socket
}

// outFrame is an encoded frame waiting for the round's commit.
type outFrame struct {
	sub   *subscription
	frame []byte
	count int // messages carried, for auto-credit
}

// deliveryBuf accumulates one subscription's deliveries of a round.
type deliveryBuf struct {
	msgs []fibp.DeliveryMessage
	size int
}

const (
	maxOpsPerRound      = 1024
	maxDispatchPerRound = 2048
	autoCreditWindow    = 1024
	deliveryFrameBytes  = 1 << 20
)

func newActor(b *Broker, def store.QueueRecord) *actor {
	a := &actor{
		b:       b,
		name:    def.Name,
		def:     def,
		log:     b.log.With("queue", def.Name),
		m:       b.metrics.forQueue(def.Name),
		ops:     make(chan op, b.opts.InboxSize),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		subs:    map[string]*subscription{},
		bodies:  newBodyCache(b.opts.BodyCacheBytes, &b.cacheBytes),
		batch:   b.db.NewBatch(),
		commits: make(chan *commit, 4),
		synced:  make(chan struct{}),
		pending: map[*subscription]*deliveryBuf{},
		p:       newPersistence(),
		dedup:   newDedupMemory(),
	}
	a.internal.wake = make(chan struct{}, 1)
	a.eng = a.newEngine()
	return a
}

// newEngine makes an empty engine queue configured from the definition.
func (a *actor) newEngine() *engine.Queue {
	cfg := a.b.engineConfig(&a.def)
	eng, err := engine.NewQueue(a.name, cfg)
	if err != nil {
		a.log.Error("invalid queue configuration; using the defaults", "err", err)
		eng, _ = engine.NewQueue(a.name, engine.DefaultConfig())
	}
	if a.def.DLQOf != "" {
		// A dead-letter queue has nowhere to dead-letter to: its failures always retry.
		eng.SetFailurePolicy(engine.FailurePolicyFunc(func(*engine.Message, string) (engine.FailureDecision, bool) {
			return engine.FailureDecision{}, true
		}))
	}
	return eng
}

// submit queues a request from a connection; false means the inbox is full (ChannelFull).
func (a *actor) submit(o op) bool {
	select {
	case a.ops <- o:
		return true
	default:
		return false
	}
}

// call runs f on the actor and waits for it, for admin requests that need an answer. It returns
// false when the actor has stopped.
func (a *actor) call(f func(a *actor)) bool {
	ch := make(chan struct{})
	a.internal.push(func(a *actor) { f(a); close(ch) })
	select {
	case <-ch:
		return true
	case <-a.done:
		return false
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

func (a *actor) run() {
	defer close(a.done)
	go a.syncLoop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var batch []op
	for {
		batch = batch[:0]
		select {
		case o := <-a.ops:
			batch = append(batch, o)
		case <-a.internal.wake:
		case <-timer.C:
		case <-a.stop:
			a.shutdown()
			return
		}
		batch = a.internal.take(batch)
	drain:
		for len(batch) < maxOpsPerRound {
			select {
			case o := <-a.ops:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		a.round(batch)
		clear(batch)
		if a.deleted {
			a.shutdown()
			return
		}
		a.arm(timer)
	}
}

// arm sets the timer to the engine's next self-driven change.
func (a *actor) arm(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	next, ok := a.eng.NextWakeup()
	if at, has := a.nextDedupExpiry(); has && (!ok || at < next) {
		next, ok = at, true
	}
	d := time.Hour
	if ok {
		d = max(time.Duration(next-a.b.clock().UnixMilli())*time.Millisecond, 0)
	}
	t.Reset(d)
}

// commit is one round on its way to durability: its storage batch, the replies waiting for it
// and the frames to send once it is durable.
type commit struct {
	batch   *storage.Batch
	err     error // from Apply
	lazy    bool  // applied without an fsync: durable with the next synced commit or SyncWAL
	synced  bool  // applied with an fsync
	replies []func(err error)
	outbox  []outFrame
}

// round runs one batch of operations, then expiry and dispatch, then applies the round's writes to
// storage and hands them to the sync waiter: the actor goes on with the next round while this one
// is being fsynced (Pebble syncs applied batches in order), and the waiter answers and delivers.
func (a *actor) round(batch []op) {
	for _, o := range batch {
		o(a)
	}
	if !a.deleted {
		now := a.now()
		a.forgetExpired(now)
		a.expire(now)
		a.dispatch(now)
	}
	if a.batch.Empty() && len(a.replies) == 0 && len(a.outbox) == 0 {
		return
	}
	sync := a.b.opts.Sync
	c := &commit{batch: a.batch, replies: a.replies, outbox: a.outbox,
		lazy: sync && !a.urgent && len(a.outbox) == 0 && a.b.opts.SettleSyncDelay > 0}
	a.batch, a.replies, a.outbox, a.urgent = a.b.db.NewBatch(), nil, nil, false
	if !c.batch.Empty() {
		c.synced = sync && !c.lazy
		c.err = c.batch.Apply(c.synced)
	} else {
		c.lazy = false // nothing written: its replies need no fsync
	}
	a.commits <- c
	a.bodies.trim()
}

// syncLoop waits for each applied round to be durable, in order, then answers its requests and
// sends its deliveries. Lazy rounds are held until a later round's fsync covers them (the WAL is
// written in order) or until the settle delay passes and the loop fsyncs itself. A failed sync
// answers StorageError and has the actor reload its state from storage, so memory never runs
// ahead of disk for long.
func (a *actor) syncLoop() {
	defer close(a.synced)
	var held []*commit
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	release := func(err error) {
		for _, c := range held {
			a.finish(c, err)
		}
		clear(held)
		held = held[:0]
	}
	for {
		var c *commit
		var ok bool
		if len(held) == 0 {
			c, ok = <-a.commits
		} else {
			select {
			case c, ok = <-a.commits:
			case <-linger.C:
				release(a.b.db.SyncWAL())
				continue
			}
		}
		if !ok {
			if len(held) > 0 {
				release(a.b.db.SyncWAL())
			}
			return
		}
		if c.lazy && c.err == nil {
			if len(held) == 0 {
				linger.Reset(a.b.opts.SettleSyncDelay)
			}
			held = append(held, c)
			continue
		}
		start := time.Now()
		err := c.err
		if err == nil {
			err = c.batch.Wait()
		}
		a.b.metrics.commitSeconds.Observe(time.Since(start).Seconds())
		if len(held) > 0 && c.synced {
			linger.Stop()
			release(err) // c's fsync covered every round applied before it
		}
		a.finish(c, err)
	}
}

// finish answers a round's requests and, when it is durable, sends its deliveries.
func (a *actor) finish(c *commit, err error) {
	for _, reply := range c.replies {
		reply(err)
	}
	if err == nil {
		a.flushOutbox(c.outbox)
	} else {
		a.log.Error("storage commit failed; reloading the queue from storage", "err", err)
		if !a.reloadQueued.Swap(true) { // one reload covers every round failed before it runs
			a.internal.push(func(a *actor) { a.reloadQueued.Store(false); a.reload() })
		}
	}
	c.batch.Close()
}

// afterCommit registers a reply to run once the round's writes are durable (err nil) or failed.
// It runs on the sync waiter's goroutine: it must not touch actor state.
func (a *actor) afterCommit(f func(err error)) {
	a.replies = append(a.replies, f)
	a.urgent = true
}

// afterSettle is afterCommit for acks, nacks and extensions: their round may wait for a later
// round's fsync (see actor).
func (a *actor) afterSettle(f func(err error)) { a.replies = append(a.replies, f) }

// flushOutbox sends a durable round's frames. It runs on the sync waiter's goroutine.
func (a *actor) flushOutbox(outbox []outFrame) {
	for i := range outbox {
		f := &outbox[i]
		sub := f.sub
		var onWritten func()
		if sub.auto && f.count > 0 {
			n := uint32(f.count)
			onWritten = func() {
				a.internal.push(func(a *actor) {
					if a.subs[sub.id] == sub {
						_ = a.eng.AddCredit(sub.id, n)
					}
				})
			}
		}
		if !sub.sink.Send(f.frame, onWritten) {
			a.internal.push(func(a *actor) { a.dropSubscription(sub) })
		}
	}
}

func (a *actor) dropSubscription(sub *subscription) {
	if a.subs[sub.id] == sub {
		delete(a.subs, sub.id)
		_ = a.eng.Unsubscribe(sub.id)
	}
}

// shutdown ends every subscription; leases stay and expire normally on the next start.
func (a *actor) shutdown() {
	close(a.commits)
	<-a.synced
	if a.deleted {
		a.b.metrics.drop(a.name)
	}
	a.bodies.clear()
	a.batch.Close()
}

// reload rebuilds the engine from storage after a failed commit.
func (a *actor) reload() {
	subs := a.subs
	a.eng = a.newEngine()
	a.bodies.clear()
	a.p = newPersistence()
	a.claimed = nil
	a.dedup = newDedupMemory()
	if err := a.recover(); err != nil {
		a.log.Error("reloading the queue failed", "err", err)
	}
	for id, sub := range subs {
		credit := uint32(0)
		if sub.auto {
			credit = autoCreditWindow
		}
		_ = a.eng.Subscribe(id, credit)
	}
}
