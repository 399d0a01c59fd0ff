package broker

import (
	"log/slog"
	"sync"
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

	subs   map[string]*subscription
	bodies bodyCache
	p      persistence

	// Per-round state.
	batch    *storage.Batch
	replies  []func(err error)
	outbox   []outFrame
	pending  map[*subscription]*deliveryBuf
	leaseBuf []engine.Lease
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
		pending: map[*subscription]*deliveryBuf{},
		p:       newPersistence(),
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
	d := time.Hour
	if at, ok := a.eng.NextWakeup(); ok {
		d = time.Duration(at-a.b.clock().UnixMilli()) * time.Millisecond
		if d < 0 {
			d = 0
		}
	}
	t.Reset(d)
}

// round runs one batch of operations, then expiry and dispatch, then commits and answers.
func (a *actor) round(batch []op) {
	for _, o := range batch {
		o(a)
	}
	if !a.deleted {
		now := a.now()
		a.expire(now)
		a.dispatch(now)
	}
	var err error
	if !a.batch.Empty() {
		start := time.Now()
		err = a.batch.Commit(a.b.opts.Sync)
		a.b.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	}
	for _, reply := range a.replies {
		reply(err)
	}
	clear(a.replies)
	a.replies = a.replies[:0]
	if err == nil {
		a.flushOutbox()
	} else {
		a.log.Error("storage commit failed; reloading the queue from storage", "err", err)
		a.outbox = a.outbox[:0]
		a.reload()
	}
	a.bodies.trim()
}

// afterCommit registers a reply to run once the round's writes are durable (err nil) or failed.
func (a *actor) afterCommit(f func(err error)) { a.replies = append(a.replies, f) }

func (a *actor) flushOutbox() {
	for i := range a.outbox {
		f := &a.outbox[i]
		var onWritten func()
		if f.sub.auto && f.count > 0 {
			sub, n := f.sub, uint32(f.count)
			onWritten = func() {
				a.internal.push(func(a *actor) {
					if a.subs[sub.id] == sub {
						_ = a.eng.AddCredit(sub.id, n)
					}
				})
			}
		}
		if !f.sub.sink.Send(f.frame, onWritten) {
			a.dropSubscription(f.sub)
		}
		f.frame = nil
	}
	a.outbox = a.outbox[:0]
}

func (a *actor) dropSubscription(sub *subscription) {
	if a.subs[sub.id] == sub {
		delete(a.subs, sub.id)
		_ = a.eng.Unsubscribe(sub.id)
	}
}

// shutdown ends every subscription; leases stay and expire normally on the next start.
func (a *actor) shutdown() {
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
