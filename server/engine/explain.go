package engine

import (
	"fmt"
	"math"
)

// Explanations: why a stored message, or a fairness key, is not delivered now, read from the
// very fields Dispatch reads (the key FIFOs, the DRR round and deficits, the subscriptions with
// credit, the delayed heap, the leases, ordering groups, the hold and the Admission's parked
// classes). Nothing is guessed and nothing is changed but the promotions every read of the
// clock implies (Advance).
//
// Without an Admission the answer is exact: a message Explain calls deliverable now is the one
// the next Dispatch at the same time delivers first, and one it does not is not delivered by it
// (TestExplainPredictsDispatch). With an Admission (throttles) the engine cannot ask it without
// counting a delivery: a parked message is explained as throttled with its class and the time
// its class is asked again, and a ready one as deliverable when it would be offered first — the
// broker asks its throttles whether they would admit it (broker/explain.go).

// Reason names why a message (or a key's messages) is not delivered now.
type Reason uint8

const (
	// ReasonDelayed: the message waits for its NotBefore (an enqueue delay or a retry backoff),
	// Blocker.Until.
	ReasonDelayed Reason = iota + 1
	// ReasonLeased: in flight to Blocker.Consumer until Blocker.Until, attempt Blocker.Attempt
	// of Blocker.MaxAttempts.
	ReasonLeased
	// ReasonOrdering: behind the head of its ordering group (Blocker.Group, Blocker.Head in
	// Blocker.HeadState), Blocker.Ahead messages of the group before it.
	ReasonOrdering
	// ReasonThrottled: parked by the Admission with its class (Blocker.Class) until
	// Blocker.Until, when the class is asked about again (0: its probe is out now), behind
	// Blocker.Ahead messages of its class.
	ReasonThrottled
	// ReasonFairness: its fairness key does not hold the DRR turn: Blocker.KeysAhead keys come
	// before it in the round, with Blocker.DeliveriesAhead deliveries left in their turns; the
	// key's deficit is Blocker.Deficit and it receives Blocker.Weight × Blocker.Quantum at its
	// turn.
	ReasonFairness
	// ReasonKeyBacklog: Blocker.Ahead messages of its own fairness key are before it.
	ReasonKeyBacklog
	// ReasonParked: its on_enqueue script failed (Blocker.Error, Blocker.Tries failed tries):
	// stored unclassified, never delivered until classified.
	ReasonParked
	// ReasonReclaimHold: held by the reclaim grace of fast delivery durability until
	// Blocker.Until (Hold).
	ReasonReclaimHold
	// ReasonNoSubscriber: the queue has no subscription.
	ReasonNoSubscriber
	// ReasonNoCredit: no subscription has credit left.
	ReasonNoCredit
)

var reasonNames = [...]string{"", "delayed", "leased", "ordering", "throttled", "fairness", "key_backlog",
	"parked", "reclaim_hold", "no_subscriber", "no_credit"}

// String returns the reason's name as the admin API spells it; unknown values print as
// "Reason(n)".
func (r Reason) String() string {
	if r > 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// explainWalk bounds every walk an explanation makes along a list (a key's FIFO, a group, a
// parked class, the DRR round): a position past it is reported as at least explainWalk
// (Blocker.AtLeast), so an explanation costs at most a few milliseconds at any depth.
const explainWalk = 1 << 18

// Blocker is one reason a message is not delivered now, with the figures behind it; which
// fields are set depends on Reason (see the Reason constants).
type Blocker struct {
	Reason Reason
	// Until is a time (Unix ms): the NotBefore (delayed), the lease's expiry (leased), the end
	// of the hold (reclaim_hold), when the class is asked about again (throttled).
	Until int64
	// Leased: who holds the lease since when, and the attempt it is.
	Consumer             string
	LeasedAt             int64
	Attempt, MaxAttempts uint32
	// Ordering: the group and its head.
	Group     string
	Head      MsgID
	HeadState string
	// Throttled: the Admission's class.
	Class string
	// Fairness.
	KeysAhead       int
	DeliveriesAhead uint64
	Deficit         uint64
	Weight, Quantum uint32
	// Ahead counts the messages before this one (key_backlog, ordering, throttled) — for a
	// key's explanation, Count is how many of its messages the reason holds; AtLeast when a walk
	// stopped at explainWalk.
	Ahead   int
	Count   int
	AtLeast bool
	// Parked: the script's error and the failed tries.
	Error string
	Tries uint32
}

// Explanation is a stored message's state and every reason it is not delivered now.
type Explanation struct {
	ID MsgID
	// State: ready, delayed, leased, held (reclaim grace), waiting (behind its ordering group's
	// head), throttled (parked by the Admission) or parked (unclassified).
	State       string
	FairnessKey string
	Group       string
	Grouped     bool
	Attempts    uint32
	MaxAttempts uint32
	EnqueuedAt  int64
	NotBefore   int64
	LastError   string
	// DeliverableNow: the next Dispatch at the same time delivers this message first (subject
	// to the Admission, if any). Blockers is then empty.
	DeliverableNow bool
	Blockers       []Blocker
}

// stateName names an internal state for explanations.
func stateName(st uint32) string {
	switch st {
	case stReady, stRestored:
		return "ready"
	case stDelayed:
		return "delayed"
	case stLeased:
		return "leased"
	case stHeld:
		return "held"
	case stWaiting:
		return "waiting"
	case stParked:
		return "throttled"
	case stUnclassified:
		return "parked"
	}
	return "unknown"
}

// Explain says where the stored message id is at now (Unix ms) and why it is not delivered
// now; false when id is not stored. It promotes what is due at now first, as Advance does. It
// costs O(1) but for the walks bounded by explainWalk: the message's place in its key's FIFO,
// its group or its class, and its key's place in the DRR round.
func (q *Queue) Explain(id MsgID, now int64) (Explanation, bool) {
	q.advance(now)
	slot, ok := q.index.find(id, q.slab)
	if !ok {
		return Explanation{}, false
	}
	r := q.slab.at(slot)
	k := r.key()
	ks := &q.keys[k]
	e := Explanation{ID: id, State: stateName(r.state()), FairnessKey: ks.name, Attempts: r.attempts,
		MaxAttempts: q.cfg.MaxAttempts, EnqueuedAt: r.enqueuedAt, NotBefore: r.notBefore}
	e.Group, e.Grouped = q.groupOf(slot, r)
	if r.meta&metaHasError != 0 {
		e.LastError = q.errs[slot]
	}
	add := func(b Blocker) { e.Blockers = append(e.Blockers, b) }
	switch r.state() {
	case stLeased:
		l := &q.leases[r.next]
		add(Blocker{Reason: ReasonLeased, Until: l.expiresAt, Consumer: l.consumer, LeasedAt: l.leasedAt,
			Attempt: r.attempts, MaxAttempts: q.cfg.MaxAttempts})
		return e, true
	case stUnclassified:
		tries, _ := q.unclassifiedTries(slot)
		add(Blocker{Reason: ReasonParked, Error: e.LastError, Tries: tries})
		return e, true
	case stDelayed:
		add(Blocker{Reason: ReasonDelayed, Until: r.notBefore})
	case stHeld:
		add(Blocker{Reason: ReasonReclaimHold, Until: q.holdUntil})
	case stWaiting:
		add(q.orderingBlocker(slot))
	case stParked:
		add(q.throttleBlocker(r))
	case stReady:
		if ks.head != slot {
			ahead, exact := q.aheadInKey(ks, slot)
			add(Blocker{Reason: ReasonKeyBacklog, Ahead: ahead, AtLeast: !exact})
		}
		if q.active.head != k {
			add(q.fairnessBlocker(k))
		}
	}
	if b, ok := q.consumerBlocker(); ok {
		add(b)
	}
	e.DeliverableNow = len(e.Blockers) == 0
	return e, true
}

// consumerBlocker is the reason nothing is delivered at all: no subscription, or none with
// credit.
func (q *Queue) consumerBlocker() (Blocker, bool) {
	switch {
	case len(q.subIdx) == 0:
		return Blocker{Reason: ReasonNoSubscriber}, true
	case q.credited.n == 0:
		return Blocker{Reason: ReasonNoCredit}, true
	}
	return Blocker{}, false
}

// aheadInKey counts the messages before slot in its key's FIFO, walking from both ends; exact
// is false when the walk stopped at explainWalk.
func (q *Queue) aheadInKey(ks *keyState, slot uint32) (ahead int, exact bool) {
	f, b := ks.head, ks.tail
	for i := range explainWalk {
		switch {
		case f == slot:
			return i, true
		case b == slot:
			return int(ks.pending) - 1 - i, true
		case f == nilIdx || b == nilIdx:
			return 0, false // not in the FIFO (cannot happen for a ready message)
		}
		f, b = q.slab.at(f).next, q.slab.at(b).prev
	}
	return explainWalk, false
}

// fairnessBlocker describes key k's place in the DRR round (k is in it): the keys before it and
// the deliveries left in their turns (each key ahead delivers its remaining deficit — or, when
// its turn has not begun, weight × quantum — or its ready messages if fewer).
func (q *Queue) fairnessBlocker(k uint32) Blocker {
	ks := &q.keys[k]
	b := Blocker{Reason: ReasonFairness, Deficit: ks.deficit, Weight: ks.weight, Quantum: q.cfg.Quantum}
	if !q.active.contains(k) {
		return b
	}
	for j := q.active.head; j != k; j = q.active.next[j] {
		if b.KeysAhead == explainWalk {
			b.AtLeast = true
			break
		}
		b.KeysAhead++
		b.DeliveriesAhead += q.turnLeft(j)
	}
	return b
}

// turnLeft is how many deliveries key j (in the round) makes before passing the turn on.
func (q *Queue) turnLeft(j uint32) uint64 {
	ks := &q.keys[j]
	d := ks.deficit
	if d == 0 {
		d = uint64(ks.weight) * uint64(q.cfg.Quantum)
	}
	return min(d, uint64(ks.pending))
}

// orderingBlocker describes the group a waiting message is behind the head of.
func (q *Queue) orderingBlocker(slot uint32) Blocker {
	g := &q.groups
	gs := &g.list[g.link(slot).group]
	head := q.slab.at(gs.head)
	b := Blocker{Reason: ReasonOrdering, Group: gs.name, Head: head.id, HeadState: stateName(head.state())}
	for s := gs.head; s != slot && s != nilIdx; s = g.link(s).next {
		if b.Ahead == explainWalk {
			b.AtLeast = true
			break
		}
		b.Ahead++
	}
	return b
}

// throttleBlocker describes the parked class of a parked message.
func (q *Queue) throttleBlocker(r *rec) Blocker {
	p := &q.park
	b := Blocker{Reason: ReasonThrottled}
	g, ok := p.of[r.id]
	if !ok {
		return b
	}
	pg := &p.groups[g]
	b.Class = pg.class
	if pg.pos >= 0 {
		b.Until = pg.wakeAt
	}
	if pg.probe != nilIdx {
		b.Ahead++ // the probe is out, ahead of every member
	}
	for s := pg.head; s != nilIdx && q.slab.at(s) != r; s = q.slab.at(s).next {
		if b.Ahead >= explainWalk {
			b.AtLeast = true
			break
		}
		b.Ahead++
	}
	return b
}

// KeyExplanation is a fairness key's state and every reason its messages are not delivered now.
type KeyExplanation struct {
	Key string
	// Stored counts the key's stored messages in every state; InFlight those leased; Backlog the
	// rest (Stored − InFlight); Ready those in its FIFO, deliverable in DRR order; Held those
	// held by the reclaim grace.
	Stored, InFlight, Backlog, Ready, Held uint64
	// Weight is the weight of the key's most recently enqueued message; Deficit its remaining
	// deficit in its current turn (0 unless it holds the turn); at its turn it receives Weight ×
	// Quantum.
	Weight  uint32
	Deficit uint64
	Quantum uint32
	// InRound: the key has ready messages and is in the DRR round, of RoundKeys keys; HasTurn:
	// it holds the turn. KeysAhead and DeliveriesAhead as in the fairness Blocker.
	InRound, HasTurn bool
	RoundKeys        int
	KeysAhead        int
	DeliveriesAhead  uint64
	// DeliveriesLastMinute are the key's deliveries in the last minute, QueueDeliveriesLastMinute
	// the queue's; WeightedShare the fraction of the queue's deliveries the key's weight entitles
	// it to among the keys with a backlog (0 without a backlog).
	DeliveriesLastMinute, QueueDeliveriesLastMinute uint64
	WeightedShare                                   float64
	// Blockers: why the key's backlog is not being delivered now. For a key, Blocker.Count is
	// how many of its messages a reason holds (delayed: Until is the earliest NotBefore;
	// throttled: one Blocker per parked class, Until when it is asked about again; ordering: the
	// messages behind their group's head, the rest of the backlog once the others are counted).
	Blockers []Blocker
}

// ExplainKey explains fairness key name at now (Unix ms); false when no stored message has the
// key. It promotes what is due at now first, as Advance does. Besides the O(keys) share and
// round position, it counts the key's delayed, throttled and parked messages by scanning the
// delayed heap, the parked classes and the unclassified messages, each bounded by explainWalk
// (Blocker.AtLeast when a scan stopped).
func (q *Queue) ExplainKey(name string, now int64) (KeyExplanation, bool) {
	q.advance(now)
	k, ok := q.keyIdx[name]
	if !ok {
		return KeyExplanation{}, false
	}
	ks := &q.keys[k]
	leased := q.leasedPerKey()
	inFlight := leasedOf(leased, k)
	e := KeyExplanation{Key: name, Stored: uint64(ks.refs), InFlight: uint64(inFlight),
		Backlog: uint64(ks.refs - inFlight), Ready: uint64(ks.pending), Held: uint64(ks.held),
		Weight: ks.weight, Deficit: ks.deficit, Quantum: q.cfg.Quantum,
		InRound: q.active.contains(k), HasTurn: q.active.head == k, RoundKeys: q.active.n,
		DeliveriesLastMinute: q.rates.ofKey(k, now), QueueDeliveriesLastMinute: q.DeliveriesLastMinute(now)}
	if e.Backlog > 0 {
		e.WeightedShare = float64(ks.weight) / float64(q.backlogWeight(leased))
	}
	add := func(b Blocker) { e.Blockers = append(e.Blockers, b) }
	if e.InRound && !e.HasTurn {
		b := q.fairnessBlocker(k)
		b.Count = int(ks.pending)
		e.KeysAhead, e.DeliveriesAhead = b.KeysAhead, b.DeliveriesAhead
		add(b)
	}
	accounted := e.Ready + e.Held
	if ks.held > 0 {
		add(Blocker{Reason: ReasonReclaimHold, Until: q.holdUntil, Count: int(ks.held)})
	}
	if b, ok := q.keyDelayed(k); ok {
		accounted += uint64(b.Count)
		add(b)
	}
	for _, b := range q.keyThrottled(k) {
		accounted += uint64(b.Count)
		add(b)
	}
	if b, ok := q.keyParked(k); ok {
		accounted += uint64(b.Count)
		add(b)
	}
	if rest := e.Backlog - min(accounted, e.Backlog); rest > 0 && len(q.groups.idx) > 0 && !q.groups.off {
		add(Blocker{Reason: ReasonOrdering, Count: int(rest)})
	}
	if e.Backlog > 0 {
		if b, ok := q.consumerBlocker(); ok {
			b.Count = int(e.Backlog)
			add(b)
		}
	}
	return e, true
}

// backlogWeight sums the weights of the keys with a backlog (stored messages not in flight;
// leased: leasedPerKey): O(keys).
func (q *Queue) backlogWeight(leased []uint32) uint64 {
	var w uint64
	for i := range q.keys {
		if ks := &q.keys[i]; ks.refs > leasedOf(leased, uint32(i)) {
			w += uint64(ks.weight)
		}
	}
	return w
}

// leasedPerKey counts the leased messages of every key, by key index (nil when none is leased),
// from the lease heap: O(in flight). Keys do not count their leases as they come and go, so that
// leasing and acknowledging stay as they were.
func (q *Queue) leasedPerKey() []uint32 {
	if q.inFlight == 0 {
		return nil
	}
	n := make([]uint32, len(q.keys))
	for _, e := range q.leaseHeap.ents {
		n[q.slab.at(e.ref).key()]++
	}
	return n
}

func leasedOf(leased []uint32, k uint32) uint32 {
	if leased == nil {
		return 0
	}
	return leased[k]
}

// keyDelayed counts key k's delayed messages, with the earliest NotBefore, scanning the delayed
// heap (bounded).
func (q *Queue) keyDelayed(k uint32) (Blocker, bool) {
	b := Blocker{Reason: ReasonDelayed, Until: math.MaxInt64}
	for i, ent := range q.delayed.ents {
		if i == explainWalk {
			b.AtLeast = true
			break
		}
		if q.slab.at(ent.ref).key() == k {
			b.Count++
			b.Until = min(b.Until, ent.at)
		}
	}
	return b, b.Count > 0
}

// keyThrottled counts key k's parked messages by class, scanning the parked classes (bounded).
func (q *Queue) keyThrottled(k uint32) []Blocker {
	var out []Blocker
	seen := 0
	for _, g := range q.park.byClass {
		pg := &q.park.groups[g]
		b := Blocker{Reason: ReasonThrottled, Class: pg.class}
		if pg.pos >= 0 {
			b.Until = pg.wakeAt
		}
		for s := pg.head; s != nilIdx; s = q.slab.at(s).next {
			if seen++; seen > explainWalk {
				b.AtLeast = true
				break
			}
			if q.slab.at(s).key() == k {
				b.Count++
			}
		}
		if b.Count > 0 {
			out = append(out, b)
		}
		if seen > explainWalk {
			break
		}
	}
	return out
}

// keyParked counts key k's unclassified messages (bounded).
func (q *Queue) keyParked(k uint32) (Blocker, bool) {
	b := Blocker{Reason: ReasonParked}
	seen := 0
	for slot := range q.uncl.tries {
		if seen++; seen > explainWalk {
			b.AtLeast = true
			break
		}
		if r := q.slab.at(slot); r.state() == stUnclassified && r.key() == k {
			b.Count++
			if b.Error == "" && r.meta&metaHasError != 0 {
				b.Error = q.errs[slot]
			}
		}
	}
	return b, b.Count > 0
}

// CreditedConsumers appends the subscriptions with credit to dst, the one with the delivery turn
// first, and returns the extended slice.
func (q *Queue) CreditedConsumers(dst []string) []string {
	s := q.credited.head
	for range q.credited.n {
		dst = append(dst, q.subs[s].id)
		s = q.credited.next[s]
	}
	return dst
}

// HoldUntil reports the end of the hold (Unix ms) while messages are held.
func (q *Queue) HoldUntil() (int64, bool) { return q.holdUntil, q.nHeld > 0 }
