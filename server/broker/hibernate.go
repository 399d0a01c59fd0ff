package broker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/raftstore"
)

// Hibernation: an idle queue group costs no goroutine.
//
// A group is awake while its actor's goroutine runs (with the waiter and the four goroutines of
// its Raft group). Once it has had no request for Options.IdleTimeout and holds nothing that
// needs it awake — no subscription, no round in flight, no throttle, no lease of a lane with
// fast delivery durability (those leases live only in memory), no failing store — it
// hibernates: it stops its Raft group (whose state stays in Pebble), drops its queue state and
// keeps only a summary of it (the counters of both lanes, the time of its next self-driven
// change). The summary is also stored with the group's log (summaryKey), stamped with the log's
// last index.
//
// While asleep:
//   - stats, listings, metrics and definitions answer from the summary and the definitions the
//     actor keeps, without waking it (the summary is exact: nothing changes a sleeping group but
//     time, and the group wakes when time would change it);
//   - anything queued for it — a request, a subscription, an admin change — pokes it: a new
//     goroutine reopens the Raft group from Pebble (snapshot and log) and runs what waits;
//   - its next self-driven change is an entry of the broker's one sleepers heap (sleepers.go),
//     which pokes it when due.
//
// At start, the meta group is replayed and each queue group whose stored summary matches its
// log's last index, and has nothing due, is registered asleep without opening its Raft group;
// the others (a crash left no summary, something is due) are opened as before. A restart thus
// reads one key per idle queue instead of replaying its group.
//
// Replicas (sleepreplicas.go). A hibernated group stays a member of its Raft configuration:
// hibernation stops the node's goroutines for the group, not its membership, and is decided per
// node. A group hibernates only when every member agrees it is idle: the leader proposes a
// Hibernate command once idle, and each member that applies it as its log's last entry stops its
// group (keeping a summary of the state it applied), so nobody starts an election against a
// silent leader; the leader stops its own once its followers heard the entry committed, and
// sends nothing after it. A Raft message for a sleeping group reaches the broker through the
// node link (WakeGroup): the leader's last heartbeats are answered for the sleeping member, and
// anything else wakes it (the message waits until the group has reopened). Any member that gets a
// request wakes and stands for election, which wakes the others; a member that missed the
// Hibernate command (it was down) keeps running and stands for election too — the same path.
// Timers are the leader's alone (it decides expiry), so only the leader keeps a sleepers entry.

// life says whether an actor's goroutine runs.
type life uint8

const (
	lifeAwake  life = iota // the goroutine runs (or is reopening the group)
	lifeAsleep             // hibernating: no goroutine, no Raft group, reads answer from the summary
	lifeEnded              // stopped for good: deleted, or the broker closed
)

// dormancy is an actor's hibernation state, guarded by mu. sleeping mirrors life == lifeAsleep
// for the hot path, which only takes mu when the actor sleeps.
type dormancy struct {
	mu       sync.Mutex
	life     life
	sleeping atomic.Bool
	sum      summary
	settled  chan struct{} // closed once the group that fell asleep has stopped
	raft     sleepingLog   // what a follower answers its leader from while asleep (sleepreplicas.go)
}

// summary describes a sleeping group's state.
type summary struct {
	Index  uint64 // the group's last log index when it fell asleep
	Wakes  bool   // it has a self-driven change to come, at WakeAt (Unix ms)
	WakeAt int64
	Lanes  [2]laneSummary
}

// laneSummary is one lane's counters.
type laneSummary struct {
	Stats     engine.Stats
	Oldest    int64 // enqueue time of its oldest ready message, when HasOldest
	HasOldest bool
}

const (
	// DefaultIdleTimeout is how long a queue group goes without requests before it hibernates.
	DefaultIdleTimeout = 10 * time.Second
	// maxSummaryKeys bounds the fairness keys a summary holds: a group with more stays awake.
	maxSummaryKeys = 1024
)

// maxSleepMessages bounds the messages a group may hold and still hibernate: waking rebuilds
// every stored message from the log (on this machine about a second per few hundred thousand),
// and the request that wakes the group waits for it. A larger backlog keeps its group awake, so
// no request ever waits seconds for a wake. A variable so that tests can lower it.
var maxSleepMessages = 100_000

// summaryKey is where a group's summary is stored, in its stable store.
var summaryKey = []byte("fila.summary")

// post queues an operation and wakes the actor if it sleeps.
func (a *actor) post(o op) {
	a.internal.push(o)
	a.poke()
}

// postAwake queues an operation for an awake, leading actor only: a sleeping or following one
// needs none (the change it carries is read again when the group opens or this node leads).
func (a *actor) postAwake(o op) {
	a.postIfAwake(func(a *actor) {
		if a.leading { // a follower has nothing the operation changes (roles.go)
			o(a)
		}
	})
}

// postIfAwake queues an operation for an awake actor, whatever its role; a sleeping one needs
// none.
func (a *actor) postIfAwake(o op) {
	d := &a.dorm
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.life == lifeAwake {
		a.internal.push(o)
	}
}

// poke wakes the actor if it sleeps: anything queued for it calls it after queueing.
func (a *actor) poke() {
	d := &a.dorm
	if !d.sleeping.Load() {
		return
	}
	d.mu.Lock()
	if d.life != lifeAsleep {
		d.mu.Unlock()
		return
	}
	d.life = lifeAwake
	d.sleeping.Store(false)
	a.b.sleepers.cancel(a)
	settled := d.settled
	d.mu.Unlock()
	a.b.awake.Add(1)
	go a.wake(settled)
}

// asleep runs f while the actor sleeps (so nothing changes what f reads) and reports whether it
// did; f must not block.
func (a *actor) asleep(f func(s *summary)) bool {
	d := &a.dorm
	if !d.sleeping.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.life != lifeAsleep {
		return false
	}
	f(&d.sum)
	return true
}

// halt stops the actor for good (the broker closes): a sleeping one at once, an awake one
// through its stop channel.
func (a *actor) halt() {
	d := &a.dorm
	d.mu.Lock()
	if d.life != lifeAsleep {
		close(a.stop)
		d.mu.Unlock()
		return
	}
	d.life = lifeEnded
	d.sleeping.Store(false)
	a.b.sleepers.cancel(a)
	settled := d.settled
	d.mu.Unlock()
	<-settled
	a.end()
}

// end marks the actor stopped for good and answers what still waits.
func (a *actor) end() {
	a.dorm.mu.Lock()
	a.dorm.life = lifeEnded
	a.dorm.mu.Unlock()
	a.closeInbox()
	close(a.done)
}

// wake runs a poked actor: it reopens the group once the one that fell asleep has stopped.
func (a *actor) wake(settled chan struct{}) {
	<-settled
	if !a.reopen() {
		a.b.awake.Add(-1)
		a.end()
		return
	}
	a.lastBusy = a.b.clock().UnixMilli()
	a.run()
}

// reopen opens the group, waiting while the store refuses writes (a Raft group cannot start
// then) and retrying other failures each second; false when the actor is stopped meanwhile.
// While the store refuses writes, the requests that reach the inbox are answered StorageError,
// and so are those waiting when an attempt fails: none waits for the disk.
func (a *actor) reopen() bool {
	for {
		h := a.b.db.Health()
		var arrived chan struct{} // requests to refuse while the store refuses writes
		if h.Err == nil {
			err := a.openRefusing()
			if err == nil {
				return true
			}
			a.log.Error("waking the queue failed; retrying", "err", err)
			h.Changed = nil
		} else {
			arrived = a.ops.wake
		}
		a.ops.refuseWaiting(CodeStorageError) // none waits for the disk, or for a group that may never open
		select {
		case <-h.Changed:
		case <-arrived:
		case <-time.After(time.Second):
		case <-a.stop:
			return false
		}
	}
}

// openRefusing is open, during which the requests that wait in the inbox are answered
// StorageError whenever the store refuses writes: a group opening as the disk fails cannot lead
// (raft cannot store its term) and open gives up only after leadTimeout.
func (a *actor) openRefusing() error {
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			h := a.b.db.Health()
			var arrived chan struct{}
			if h.Err != nil {
				a.ops.refuseWaiting(CodeStorageError)
				arrived = a.ops.wake
			}
			select {
			case <-done:
				return
			case <-h.Changed:
			case <-arrived:
			}
		}
	}()
	unbound := a.boundWake() // wakebound.go
	err := a.open()
	unbound()
	close(done)
	<-watched
	signal(a.ops.wake) // a wake-up the watcher took may belong to a request it left waiting
	return err
}

// mayHibernate reports, cheaply, whether the group could hibernate once idle long enough (the
// rounds in flight will have finished by then, or it looks again later).
func (a *actor) mayHibernate() bool {
	if a.b.opts.IdleTimeout <= 0 || a.suspended || a.deleted || len(a.subs) > 0 || !a.leading || !a.maySleepReplicated() {
		return false // a follower hibernates when its leader's Hibernate entry applies (sleepreplicas.go)
	}
	for l := range a.lanes {
		if a.lanes[l].throttles != nil {
			return false
		}
	}
	return true
}

// idleSince reports whether the group has had no request for the idle time.
func (a *actor) idleSince(now int64) bool {
	return a.mayHibernate() && now >= a.lastBusy+a.b.opts.IdleTimeout.Milliseconds()
}

// drowsy reports whether an idle group hibernates now: nothing needs it awake.
func (a *actor) drowsy() bool {
	if a.inflight.Load() > 0 || a.reloadQueued.Load() || a.b.db.Health().Err != nil {
		return false
	}
	for l := range a.lanes {
		q := a.st.Lane(queuegroup.Lane(l))
		if !a.committed(queuegroup.Lane(l)) && q.Len() > 0 && q.Stats().InFlight > 0 {
			return false
		}
	}
	return true
}

// hibernate puts the actor to sleep unless something arrived meanwhile (then it reports false
// and the actor goes on). The caller's goroutine then ends.
func (a *actor) hibernate() bool {
	sum, ok := a.summarize()
	if !ok {
		return false
	}
	settled, ok := a.fallAsleep(sum, true)
	if !ok {
		return false
	}
	a.stopAndStoreSummary(sum)
	a.st.Release()
	a.st, a.fsm = nil, nil
	a.countDedup(0)
	a.attrs, a.classBuf = hooks.AttributeSets{}, nil
	close(settled)
	return true
}

// fallAsleep marks the actor asleep with summary sum unless a request arrived meanwhile (false),
// and returns the channel to close once its group has stopped; a leader (wakeTimers) also has the
// sleepers wake it at sum's due time — a follower's replica keeps no timers.
func (a *actor) fallAsleep(sum summary, wakeTimers bool) (chan struct{}, bool) {
	d := &a.dorm
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sleeping.Store(true) // before looking: a request queued after this pokes
	if a.ops.waiting() || a.internal.waiting() || closed(a.stop) {
		d.sleeping.Store(false)
		return nil, false
	}
	d.life, d.sum = lifeAsleep, sum
	settled := make(chan struct{})
	d.settled = settled
	if wakeTimers && sum.Wakes {
		a.b.sleepers.schedule(a, sum.WakeAt)
	}
	a.b.awake.Add(-1)
	return settled, true
}

// summarize describes the group's state for its sleep; false when it is too large to (too many
// fairness keys to summarize, or too many messages to wake quickly).
func (a *actor) summarize() (summary, bool) {
	var s summary
	stored := 0
	for l := range a.lanes {
		q := a.st.Lane(queuegroup.Lane(l))
		stored += q.Len()
		st := q.Stats()
		if len(st.Keys) > maxSummaryKeys || stored > maxSleepMessages {
			return summary{}, false
		}
		s.Lanes[l] = laneSummary{Stats: st}
		s.Lanes[l].Oldest, s.Lanes[l].HasOldest = q.OldestReady()
	}
	s.WakeAt, s.Wakes = a.nextWakeup()
	return s, true
}

// unsyncedSetter is a stable store that can write without an fsync of its own (raftstore).
type unsyncedSetter interface {
	SetUnsynced(key, val []byte) error
}

// storeSummary stores the summary of a stopped group, stamped with its log's last index. It
// needs no fsync: a summary lost in a power failure, or one the log moved past, only makes the
// next start open the group.
func (a *actor) storeSummary(logs raftstore.LogStableStore, s summary, last uint64) {
	s.Index = last
	if err := putSummary(logs, &s); err != nil {
		a.log.Warn("storing the queue's summary failed; the next start opens its group", "err", err)
	}
}

// storedSummary reads the summary a group stored when it last stopped; false when there is
// none or the log has moved on since. It reads the group's log through (raftgroup.Verify), so
// a damaged log stops the start as when the group opens (the error).
func (b *Broker) storedSummary(name string) (summary, bool, error) {
	logs, _, err := b.db.QueueLog(name, queuegroup.Bodies{})
	if err != nil {
		return summary{}, false, nil
	}
	raw, err := logs.Get(summaryKey)
	if err != nil {
		if !errors.Is(err, raftstore.ErrKeyNotFound) {
			b.log.Warn("reading a queue's summary failed; opening its group", "queue", name, "err", err)
		}
		return summary{}, false, nil
	}
	s, legacy, err := decodeSummary(raw)
	if err != nil {
		b.log.Warn("a queue's stored summary does not decode; opening its group", "queue", name, "err", err)
		return summary{}, false, nil
	}
	last, err := logs.LastIndex()
	if err != nil || s.Index == 0 || s.Index != last {
		return summary{}, false, nil
	}
	if err := raftgroup.Verify(logs); err != nil {
		return summary{}, false, fmt.Errorf("broker: recover queue %q: %w", name, err)
	}
	if legacy {
		// Once: the next start reads the record.
		if err := putSummary(logs, &s); err != nil {
			b.log.Warn("storing a queue's summary again as a record failed; it stays JSON", "queue", name, "err", err)
		}
	}
	return s, true, nil
}

// sleepAll registers asleep, from their stored summaries, the groups of actors that have one
// and nothing due at now (several read at once); it returns the others.
func (b *Broker) sleepAll(actors []*actor, now int64) (opened []*actor, asleep int, err error) {
	if b.opts.IdleTimeout <= 0 {
		return actors, 0, nil
	}
	type found struct {
		s  summary
		ok bool
	}
	res := make([]found, len(actors))
	errs := eachAtOnce(len(actors), 4, func(i int) (err error) {
		res[i].s, res[i].ok, err = b.storedSummary(actors[i].name)
		return err
	})
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	for i, a := range actors {
		if s := res[i].s; res[i].ok && (!s.Wakes || s.WakeAt > now) {
			a.sleepFrom(s)
			asleep++
			continue
		}
		opened = append(opened, a)
	}
	return opened, asleep, nil
}

// sleepFrom registers a group that was not opened at start as asleep, with its stored summary.
func (a *actor) sleepFrom(s summary) {
	settled := make(chan struct{})
	close(settled)
	d := &a.dorm
	d.mu.Lock()
	d.life, d.sum, d.settled = lifeAsleep, s, settled
	d.sleeping.Store(true)
	if s.Wakes {
		a.b.sleepers.schedule(a, s.WakeAt)
	}
	d.mu.Unlock()
}

// storeSummaryAtClose stores the summary of an awake group the broker is closing, when a
// restart would find the same state (the group could have hibernated but for its idle time).
func (a *actor) storeSummaryAtClose() {
	if a.g == nil || !a.leading || !a.mayHibernateAfterClose() {
		return
	}
	sum, ok := a.summarize()
	if !ok {
		return
	}
	for l := range sum.Lanes {
		sum.Lanes[l].Stats.ActiveConsumers = 0 // the subscriptions end with the broker
		sum.Lanes[l].Stats.Held, sum.Lanes[l].Stats.Throttled = 0, 0
	}
	a.stopAndStoreSummary(sum)
}

// stopAndStoreSummary stops the group and stores sum, stamped with the log's last index.
func (a *actor) stopAndStoreSummary(sum summary) {
	g := a.g
	a.stopGroup()
	_, last := g.Stats()
	a.storeSummary(g.Store(), sum, last)
}

// mayHibernateAfterClose is mayHibernate without the subscriptions (they end with the broker):
// the state a restart rebuilds is then what the summary says.
func (a *actor) mayHibernateAfterClose() bool {
	if a.suspended || a.deleted || !a.drowsy() {
		return false
	}
	for l := range a.lanes {
		q := a.st.Lane(queuegroup.Lane(l))
		if !a.committed(queuegroup.Lane(l)) && q.Len() > 0 {
			return false // fast durability: its leases and holds are memory only
		}
		if q.Throttled() > 0 || q.Unclassified() > 0 {
			return false
		}
	}
	return true
}

// cloneStats copies s, its Keys too (readers reorder them).
func cloneStats(s engine.Stats) engine.Stats {
	s.Keys = slices.Clone(s.Keys)
	return s
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// AwakeQueues counts the queue groups whose actor runs now (the others hibernate).
func (b *Broker) AwakeQueues() int { return int(b.awake.Load()) }
