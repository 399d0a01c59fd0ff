package broker

import (
	"fmt"
	"strings"
	"time"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/service"
)

// Explanations (docs/admin-api.md): why a message, or a fairness key's backlog, is not delivered
// now. They run on the queue's actor, reading the engine's own state (engine.Queue.Explain and
// ExplainKey) between two rounds, and add what only the broker knows: which throttle and bucket
// hold a throttled message and when the bucket has room, whether the throttles of the
// subscriptions with credit would refuse a message the scheduler offers next, and a dead-lettered
// message's reason. A sleeping queue is woken: only an awake group holds its messages.

// Explanation types (server/service).
type (
	Explanation    = service.Explanation
	ExplainReason  = service.Reason
	KeyExplanation = service.KeyExplanation
)

// Explain says where message id of queue (or of its dead-letter queue) is and every reason it
// is not delivered now. It fails with CodeQueueNotFound or CodeMessageNotFound.
func (b *Broker) Explain(queue string, id MessageID) (Explanation, *Error) {
	var ex Explanation
	var found bool
	var dlq string
	e := b.onQueue(queue, func(a *actor, l queuegroup.Lane) {
		now := a.now()
		if x, ok := a.st.Lane(l).Explain(engine.MsgID(id), now); ok {
			ex, found = a.explanation(l, x, now), true
			return
		}
		if l == queuegroup.LaneQueue {
			dlq = a.lanes[queuegroup.LaneDeadLetter].name
		}
	})
	switch {
	case e != nil:
		return Explanation{}, e
	case found:
		return ex, nil
	case dlq != "":
		if m, e := b.Message(dlq, engine.MsgID(id)); e == nil {
			return deadLettered(queue, dlq, &m), nil
		}
	}
	return Explanation{}, errorf(CodeMessageNotFound, "queue %q has no message %s", queue, id)
}

// explanation turns the engine's explanation of a message of lane l into the API's, adding the
// throttles' part.
func (a *actor) explanation(l queuegroup.Lane, x engine.Explanation, now int64) Explanation {
	ex := Explanation{ID: x.ID.String(), Queue: a.lanes[l].name, State: x.State, DeliverableNow: x.DeliverableNow,
		FairnessKey: x.FairnessKey, Group: x.Group, Grouped: x.Grouped, Attempts: x.Attempts, MaxAttempts: x.MaxAttempts,
		EnqueuedAt: x.EnqueuedAt, NotBefore: x.NotBefore, LastError: x.LastError, Reasons: []ExplainReason{}}
	for _, bl := range x.Blockers {
		if bl.Reason == engine.ReasonThrottled {
			ex.Reasons = append(ex.Reasons, a.throttleReasons(l, bl, now)...)
			continue
		}
		ex.Reasons = append(ex.Reasons, reasonOf(bl, now))
	}
	if x.DeliverableNow {
		if rs := a.refusedBy(l, x.ID, now); len(rs) > 0 {
			ex.DeliverableNow = false
			ex.Reasons = append(ex.Reasons, rs...)
		}
	}
	return ex
}

// reasonOf renders an engine reason with its figures and a sentence.
func reasonOf(bl engine.Blocker, now int64) ExplainReason {
	r := ExplainReason{Reason: bl.Reason.String(), Until: bl.Until, Consumer: bl.Consumer, LeasedAt: bl.LeasedAt,
		Attempt: bl.Attempt, MaxAttempts: bl.MaxAttempts, Group: bl.Group, HeadState: bl.HeadState,
		KeysAhead: bl.KeysAhead, DeliveriesAhead: bl.DeliveriesAhead, Deficit: bl.Deficit, Weight: bl.Weight,
		Quantum: bl.Quantum, Ahead: bl.Ahead, Count: bl.Count, AtLeast: bl.AtLeast, Error: bl.Error, Tries: bl.Tries}
	if bl.Reason == engine.ReasonOrdering && bl.HeadState != "" {
		r.Head = bl.Head.String()
	}
	r.Text = reasonText(&r, now)
	return r
}

// reasonText says a reason in a sentence with its figures.
func reasonText(r *ExplainReason, now int64) string {
	atLeast := func(n int) string {
		if r.AtLeast {
			return fmt.Sprintf("at least %d", n)
		}
		return fmt.Sprint(n)
	}
	counted := ""
	if r.Count > 0 {
		counted = atLeast(r.Count) + " message(s): "
	}
	switch r.Reason {
	case "delayed":
		return counted + "delayed until " + when(r.Until, now)
	case "leased":
		return fmt.Sprintf("leased by consumer %q until %s (attempt %d of %d)", r.Consumer, when(r.Until, now), r.Attempt, r.MaxAttempts)
	case "ordering":
		if r.Head == "" {
			return counted + "waiting behind the heads of their ordering groups"
		}
		return fmt.Sprintf("waiting behind the head of ordering group %q, message %s (%s), %s message(s) ahead in the group",
			r.Group, r.Head, r.HeadState, atLeast(r.Ahead))
	case "throttled":
		if r.Throttle == "" {
			return counted + "throttled: parked until its throttle class is asked again at " + when(r.Until, now)
		}
		room := "the bucket has room now; the class is asked again at " + when(r.Until, now)
		if r.NextRoomAt > now {
			room = "next room at " + when(r.NextRoomAt, now)
		}
		return fmt.Sprintf("%sthrottled by throttle %q, bucket %s: %s", counted, r.Throttle, r.Bucket, room)
	case "fairness":
		return fmt.Sprintf("%swaiting for its fairness key's DRR turn behind %s key(s) with %d deliveries left in their turns (its deficit %d; weight %d × quantum %d at its turn)",
			counted, atLeastOf(r.KeysAhead, r.AtLeast), r.DeliveriesAhead, r.Deficit, r.Weight, r.Quantum)
	case "key_backlog":
		return fmt.Sprintf("%s older message(s) of its fairness key ahead of it", atLeast(r.Ahead))
	case "parked":
		if r.Count > 0 {
			return fmt.Sprintf("%sparked: on_enqueue failed (%s)", counted, r.Error)
		}
		return fmt.Sprintf("parked: on_enqueue failed %d time(s): %s", r.Tries, r.Error)
	case "reclaim_hold":
		return counted + "held by the reclaim grace of fast delivery durability until " + when(r.Until, now)
	case "no_subscriber":
		return counted + "no subscriber on the queue"
	case "no_credit":
		return counted + "no subscriber has credit left"
	}
	return r.Reason
}

func atLeastOf(n int, atLeast bool) string {
	if atLeast {
		return fmt.Sprintf("at least %d", n)
	}
	return fmt.Sprint(n)
}

// when renders a time (Unix ms) with how far it is from now.
func when(at, now int64) string {
	t := time.UnixMilli(at).UTC().Format("2006-01-02T15:04:05.000Z")
	switch d := time.Duration(at-now) * time.Millisecond; {
	case at == 0:
		return "now"
	case d > 0:
		return fmt.Sprintf("%s (in %s)", t, d)
	case d < 0:
		return fmt.Sprintf("%s (%s ago)", t, -d)
	}
	return t + " (now)"
}

// throttleReasons names the throttles and buckets holding a message parked with class
// bl.Class: the buckets without room, or every bucket of the class when they all have room
// again (the class is asked about again at bl.Until).
func (a *actor) throttleReasons(l queuegroup.Lane, bl engine.Blocker, now int64) []ExplainReason {
	base := reasonOf(bl, now)
	lt := a.lanes[l].throttles
	if lt == nil || bl.Class == "" {
		return []ExplainReason{base}
	}
	full, all := a.buckets(lt, bl.Class, nil, now)
	rs := full
	if len(rs) == 0 {
		rs = all
	}
	for i := range rs {
		rs[i].Until, rs[i].Ahead, rs[i].Count, rs[i].AtLeast = bl.Until, bl.Ahead, bl.Count, bl.AtLeast
		rs[i].Text = reasonText(&rs[i], now)
	}
	if len(rs) == 0 {
		return []ExplainReason{base}
	}
	return rs
}

// buckets describes the buckets of class in the lane's throttles (only those of consumers' own
// throttles, the indices only, when only is not nil): all of them, and those without room now.
func (a *actor) buckets(lt *laneThrottles, class string, only []int, now int64) (full, all []ExplainReason) {
	lt.decode(class)
	for i, bk := range lt.buckets {
		if !bk.throttled || (only != nil && !containsInt(only, i)) {
			continue
		}
		name := lt.ths[i].Name()
		r := ExplainReason{Reason: "throttled", Throttle: name, BucketMissing: bk.key.Missing}
		if bk.key.Missing {
			r.Bucket = "(missing)"
		} else {
			r.BucketValues, _ = keys.SplitGroup(bk.key.Group, nil)
			r.Bucket = strings.Join(r.BucketValues, ", ")
		}
		if bs, err := a.b.throttles.Bucket(name, bk.key, now); err == nil && bs.NextRoomAt > now {
			r.NextRoomAt = bs.NextRoomAt
			full = append(full, r)
		}
		all = append(all, r)
	}
	return full, all
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// refusedBy asks, without counting a delivery, whether the throttles of every subscription with
// credit would refuse message id of lane l now (the scheduler offers it next); it returns the
// full buckets when they would.
func (a *actor) refusedBy(l queuegroup.Lane, id engine.MsgID, now int64) []ExplainReason {
	lt := a.lanes[l].throttles
	if lt == nil {
		return nil
	}
	q := a.st.Lane(l)
	m, ok := q.Get(id)
	if !ok {
		return nil
	}
	class := lt.Class(engine.Candidate{ID: id, FairnessKey: m.FairnessKey, Attributes: m.Attributes})
	var refusals []ExplainReason
	for _, c := range q.CreditedConsumers(nil) {
		idx := lt.subs[c]
		if len(idx) == 0 {
			return nil // a subscription without throttles admits everything
		}
		full, _ := a.buckets(lt, class, idx, now)
		if len(full) == 0 {
			return nil
		}
		for _, r := range full {
			if !containsReason(refusals, r) {
				refusals = append(refusals, r)
			}
		}
	}
	for i := range refusals {
		refusals[i].Text = reasonText(&refusals[i], now)
	}
	return refusals
}

func containsReason(rs []ExplainReason, r ExplainReason) bool {
	for _, x := range rs {
		if x.Throttle == r.Throttle && x.Bucket == r.Bucket && x.BucketMissing == r.BucketMissing {
			return true
		}
	}
	return false
}

// deadLettered explains a message found in queue's dead-letter queue dlq.
func deadLettered(queue, dlq string, m *StoredMessage) Explanation {
	r := ExplainReason{Reason: "dead_lettered", Error: m.LastError, DeadLetter: m.Headers[HeaderDeadLetterReason]}
	r.Text = fmt.Sprintf("dead-lettered into %s", dlq)
	if r.DeadLetter != "" {
		r.Text += " (" + r.DeadLetter + ")"
	}
	if r.Error != "" {
		r.Text += ": " + r.Error
	}
	return Explanation{ID: m.ID.String(), Queue: queue, State: "dead_lettered", FairnessKey: m.FairnessKey,
		Group: m.Group, Grouped: m.Grouped, Attempts: m.Attempts, EnqueuedAt: m.EnqueuedAt, NotBefore: m.NotBefore,
		LastError: m.LastError, Reasons: []ExplainReason{r}}
}

// ExplainKey says where fairness key key of queue stands and every reason its backlog is not
// delivered now. A key without stored messages is answered with the no_backlog reason. It
// fails with CodeQueueNotFound.
func (b *Broker) ExplainKey(queue, key string) (KeyExplanation, *Error) {
	var kx KeyExplanation
	e := b.onQueue(queue, func(a *actor, l queuegroup.Lane) {
		now := a.now()
		x, ok := a.st.Lane(l).ExplainKey(key, now)
		if !ok {
			kx = KeyExplanation{Key: key, Queue: a.lanes[l].name, Quantum: a.st.Lane(l).Config().Quantum,
				QueueDeliveriesLastMinute: a.st.Lane(l).DeliveriesLastMinute(now),
				Reasons:                   []ExplainReason{{Reason: "no_backlog", Text: "no stored message has this fairness key"}}}
			return
		}
		kx = KeyExplanation{Key: key, Queue: a.lanes[l].name, Backlog: x.Backlog, Ready: x.Ready, Held: x.Held,
			InFlight: x.InFlight, Weight: x.Weight, Deficit: x.Deficit, Quantum: x.Quantum, InRound: x.InRound,
			HasTurn: x.HasTurn, RoundKeys: x.RoundKeys, KeysAhead: x.KeysAhead, DeliveriesAhead: x.DeliveriesAhead,
			DeliveriesLastMinute: x.DeliveriesLastMinute, QueueDeliveriesLastMinute: x.QueueDeliveriesLastMinute,
			WeightedShare: x.WeightedShare, Reasons: []ExplainReason{}}
		for _, bl := range x.Blockers {
			if bl.Reason == engine.ReasonThrottled {
				kx.Reasons = append(kx.Reasons, a.throttleReasons(l, bl, now)...)
				continue
			}
			kx.Reasons = append(kx.Reasons, reasonOf(bl, now))
		}
	})
	if e != nil {
		return KeyExplanation{}, e
	}
	return kx, nil
}
