package broker

import (
	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/queuegroup"
)

// Parking (concepts.md, "When on_enqueue fails"): on a queue whose script_failure is park, a
// message whose on_enqueue failed is stored unclassified (the Enqueue command says so) and never
// delivered. The actor tries to classify parked messages again when the queue's on_enqueue
// changes and every lua.reclassify_interval_ms; each failed try counts, and after
// park_dead_letter_after of them (0 = never) the message is dead-lettered unclassified. The
// outcome of every pass is one Reclassify command.

// parks reports whether the queue stores messages whose on_enqueue failed (rather than reject them).
func (a *actor) parks() bool {
	return a.lanes[queuegroup.LaneQueue].def.ScriptFailure == store.ScriptFailurePark
}

// reclassifyEvery is the interval between reclassification passes (Unix ms).
func (a *actor) reclassifyEvery() uint64 { return a.b.currentDefaults().ReclassifyMs }

// parked notes that a message was parked at now: a pass is due an interval later.
func (a *actor) parked(now int64) {
	if a.nextReclassify == 0 {
		a.nextReclassify = addMs(now, a.reclassifyEvery())
	}
}

// reclassifyIfDue runs the pass when its time has come.
func (a *actor) reclassifyIfDue(now int64) {
	if a.nextReclassify != 0 && now >= a.nextReclassify {
		a.reclassify(now)
	}
}

// reclassify runs on_enqueue again on every parked message and records the outcomes.
func (a *actor) reclassify(now int64) {
	q := a.st.Lane(queuegroup.LaneQueue)
	a.nextReclassify = 0
	if q.Unclassified() == 0 {
		return
	}
	var parked []engine.Message
	for m := range q.Messages() {
		if m.State == engine.StateUnclassified {
			parked = append(parked, m)
		}
	}
	items := make([]queuelog.Reclassified, len(parked))
	for i := range parked {
		items[i] = a.reclassifyOne(&parked[i])
	}
	dead, err := a.st.Reclassify(now, items)
	if err != nil {
		a.log.Error("reclassifying parked messages failed", "err", err)
	}
	for _, m := range dead {
		a.lanes[queuegroup.LaneQueue].m.deadLettered.Inc()
		a.afterCommit(func(err error) {
			if err == nil {
				a.b.events.DeadLettered(a.lanes[queuegroup.LaneQueue].name, m.ID)
			}
		})
	}
	if q.Unclassified() > 0 {
		a.parked(now)
	}
}

// reclassifyOne decides the outcome of one parked message's try.
func (a *actor) reclassifyOne(m *engine.Message) queuelog.Reclassified {
	it := queuelog.Reclassified{ID: wire.UUID(m.ID)}
	class, err := a.classifyStored(m)
	if err == nil {
		it.Outcome, it.Class = queuelog.OutcomeClassified, class
		return it
	}
	it.Outcome, it.Error = queuelog.OutcomeFailed, err.Error()
	if n := a.lanes[queuegroup.LaneQueue].def.ParkDeadLetterAfter; n > 0 && m.ClassifyTries+1 >= n {
		it.Outcome, it.Error = queuelog.OutcomeDeadLetter, "unclassified: "+err.Error()
	}
	return it
}

// classifyStored runs on_enqueue on a stored message, with the values it was stored with as the
// producer's, and returns its classification; without a hook the stored values are kept.
func (a *actor) classifyStored(m *engine.Message) (queuelog.Classification, error) {
	delay := uint64(0)
	if m.NotBefore > m.EnqueuedAt {
		delay = uint64(m.NotBefore - m.EnqueuedAt)
	}
	in := hooks.EnqueueInput{Queue: a.lanes[queuegroup.LaneQueue].name, FairnessKey: m.FairnessKey, Weight: max(m.Weight, 1),
		DelayMs: delay, Attributes: &a.attrs}
	if b, err := a.loadBody(m.ID); err == nil {
		in.Headers, in.PayloadSize = b.headers, len(b.payload)
	}
	c := hooks.Classification{FairnessKey: in.FairnessKey, Weight: in.Weight, DelayMs: delay, Attributes: m.Attributes}
	if s := a.hooks.onEnqueue; s != nil {
		var err error
		if c, err = a.b.hooks.OnEnqueue(s, in); err != nil {
			return queuelog.Classification{}, err
		}
	}
	subj := keys.Subject{Headers: in.Headers, FairnessKey: c.FairnessKey, Attributes: c.Attributes}
	group, grouped, ok := a.lanes[queuegroup.LaneQueue].keys.group(&subj)
	if !ok {
		group, grouped = "", false // a stored message cannot be refused: it goes unordered
	}
	return queuelog.Classification{FairnessKey: c.FairnessKey, Weight: c.Weight, NotBefore: addMs(m.EnqueuedAt, c.DelayMs),
		Attributes: c.Attributes, Grouped: grouped, Group: []byte(group)}, nil
}

// RedriveResult is the outcome of a Redrive.
type RedriveResult struct {
	Redriven uint64
	// LeftUnclassified stayed in the dead-letter queue: unclassified, and reclassify was none.
	LeftUnclassified uint64
	// RejectedByScript stayed in the dead-letter queue: on_enqueue failed on them and the queue
	// rejects script failures.
	RejectedByScript uint64
}

// redrive moves up to count dead-lettered messages (0 = all), oldest first, back to the queue,
// reclassifying them as mode says (concepts.md, "Dead-letter queues and redrive").
func (a *actor) redrive(count uint64, mode uint8) (RedriveResult, error) {
	var res RedriveResult
	var items []queuelog.Redriven
	for m := range a.st.Lane(queuegroup.LaneDeadLetter).Messages() {
		if count > 0 && uint64(len(items)) == count {
			break
		}
		if m.State == engine.StateLeased {
			continue
		}
		it := queuelog.Redriven{ID: wire.UUID(m.ID), Outcome: queuelog.OutcomeKeep}
		// Without a hook there is nothing to run again: only unclassified messages take their
		// stored values as their classification.
		run := (mode == ReclassifyAll && (a.hooks.onEnqueue != nil || m.Unclassified)) ||
			(mode == ReclassifyUnclassifiedOnly && m.Unclassified)
		switch {
		case !run && m.Unclassified:
			res.LeftUnclassified++
			continue
		case run:
			class, err := a.classifyStored(&m)
			switch {
			case err == nil:
				it.Outcome, it.Class = queuelog.OutcomeClassified, class
			case a.parks():
				it.Outcome = queuelog.OutcomePark
			default:
				res.RejectedByScript++
				continue
			}
		}
		items = append(items, it)
	}
	n, err := a.st.RedriveClassified(a.now(), items)
	res.Redriven = uint64(n)
	a.lanes[queuegroup.LaneQueue].m.redriven.Add(float64(n))
	for _, it := range items {
		if it.Outcome == queuelog.OutcomePark {
			a.parked(a.now())
			break
		}
	}
	return res, err
}
