package broker

import (
	"cmp"
	"encoding/binary"
	"slices"
	"time"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/queuegroup"
)

// Parking (concepts.md, "When on_enqueue fails"): on a queue whose script_failure is park, a
// message whose on_enqueue failed, or that the round's script budget left no time for, is stored
// unclassified (the Enqueue command says so) and never delivered. The actor tries to classify
// parked messages again in passes: every lua.reclassify_interval_ms, and at once when the queue's
// on_enqueue changes. A message is tried when its backoff has passed: its first retry comes an
// interval after it was parked, and each failed try doubles the wait, up to
// lua.reclassify_max_interval_ms (retryAt); after park_dead_letter_after failed tries (0 on the
// queue: defaults.park_dead_letter_after, whose 0 is never) it is dead-lettered unclassified. A
// script change tries every parked message, due or not.
//
// A pass spends at most lua.reclassify_budget_ms (a scriptBudget). A sweep is the passes over one
// list of the parked messages, taken at its first pass, oldest first (messages classified
// together join their fairness key in that order): a pass that ran out of budget leaves the rest
// of the list to the next pass, due one budget later, so a parked backlog takes at most about
// half of its queue's time and the requests between passes are answered. The outcome of every
// pass is one Reclassify command.

// reclassState is where the passes are.
type reclassState struct {
	next  int64          // when the next pass is due (Unix ms; 0: nothing is parked)
	ids   []engine.MsgID // the sweep's list of parked messages
	pos   int            // the next of them to look at
	force bool           // the sweep tries every message, due or not (the script changed)
}

// parks reports whether the queue stores messages whose on_enqueue failed (rather than reject them).
func (a *actor) parks() bool {
	return a.lanes[queuegroup.LaneQueue].def.ScriptFailure == store.ScriptFailurePark
}

// parked notes that a message was parked at now: a pass is due an interval later.
func (a *actor) parked(now int64) {
	if a.reclass.next == 0 {
		a.reclass.next = addMs(now, a.b.currentDefaults().ReclassifyMs)
	}
}

// reclassifyIfDue runs the pass when its time has come.
func (a *actor) reclassifyIfDue(now int64) {
	if a.reclass.next != 0 && now >= a.reclass.next {
		a.reclassify(now)
	}
}

// reclassifyAll begins a sweep that tries every parked message (the queue's on_enqueue changed),
// with its first pass now.
func (a *actor) reclassifyAll(now int64) {
	a.reclass.ids, a.reclass.pos, a.reclass.force = a.reclass.ids[:0], 0, true
	a.reclassify(now)
}

// reclassify runs one pass: on_enqueue again on the parked messages of the sweep that are due,
// until the pass's budget is spent, and records the outcomes.
func (a *actor) reclassify(now int64) {
	q := a.st.Lane(queuegroup.LaneQueue)
	r := &a.reclass
	r.next = 0
	if r.pos >= len(r.ids) { // a new sweep, oldest first (UUIDv7 IDs sort in acceptance order; about 160 ms a million)
		r.ids, r.pos = q.AppendUnclassified(r.ids[:0]), 0
		slices.SortFunc(r.ids, compareIDs)
	}
	d := a.b.currentDefaults()
	var budget scriptBudget
	budget.begin(time.Duration(d.LuaReclassifyBudgetMs) * time.Millisecond)
	batch := a.b.hooks.Batch()
	var items []queuelog.Reclassified
	for r.pos < len(r.ids) && budget.left() {
		m, ok := q.Get(r.ids[r.pos])
		r.pos++
		if !ok || m.State != engine.StateUnclassified || (!r.force && now < retryAt(&m, &d)) {
			continue
		}
		start := time.Now()
		items = append(items, a.reclassifyOne(batch, &m, &d))
		budget.add(time.Since(start))
	}
	batch.Close()
	budget.end()
	if len(items) > 0 {
		a.recordReclassified(now, items)
	}
	if r.pos < len(r.ids) { // the budget ran out: the sweep goes on after a pause as long
		r.next = addMs(now, max(d.LuaReclassifyBudgetMs, 1))
		return
	}
	r.ids, r.pos, r.force = nil, 0, false
	if q.Unclassified() > 0 {
		a.parked(now)
	}
}

// compareIDs orders message IDs as their bytes do.
func compareIDs(x, y engine.MsgID) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(x[:8]), binary.BigEndian.Uint64(y[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(x[8:]), binary.BigEndian.Uint64(y[8:]))
}

// recordReclassified records a pass's outcomes.
func (a *actor) recordReclassified(now int64, items []queuelog.Reclassified) {
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
}

// retryAt is when parked message m is due for its next try: its k-th retry (k = failed tries so
// far, from 0) comes the sum of the first k+1 waits after its acceptance, the first wait being
// lua.reclassify_interval_ms and each one twice the one before, up to
// lua.reclassify_max_interval_ms. It needs no state beyond the count of failed tries the queue
// keeps, and survives restarts.
func retryAt(m *engine.Message, d *Defaults) int64 {
	var total uint64
	step, most := max(d.ReclassifyMs, 1), max(d.ReclassifyMaxMs, 1)
	for k := uint64(0); k <= uint64(m.ClassifyTries); k++ {
		if step >= most {
			total += (uint64(m.ClassifyTries) - k + 1) * most // at most 2^32 × 7 days: no overflow
			break
		}
		total += step
		step *= 2
	}
	return addMs(m.EnqueuedAt, total)
}

// parkDeadLetterAfter is the failed tries after which a parked message is dead-lettered (0:
// never): the queue's own setting, or the default for a queue created with 0.
func (a *actor) parkDeadLetterAfter(d *Defaults) uint32 {
	if n := a.lanes[queuegroup.LaneQueue].def.ParkDeadLetterAfter; n > 0 {
		return n
	}
	return d.ParkDeadLetterAfter
}

// reclassifyOne decides the outcome of one parked message's try.
func (a *actor) reclassifyOne(batch *hooks.Batch, m *engine.Message, d *Defaults) queuelog.Reclassified {
	it := queuelog.Reclassified{ID: wire.UUID(m.ID)}
	class, err := a.classifyStored(batch, m)
	if err == nil {
		it.Outcome, it.Class = queuelog.OutcomeClassified, class
		return it
	}
	it.Outcome, it.Error = queuelog.OutcomeFailed, err.Error()
	if n := a.parkDeadLetterAfter(d); n > 0 && m.ClassifyTries+1 >= n {
		it.Outcome, it.Error = queuelog.OutcomeDeadLetter, "unclassified: "+err.Error()
	}
	return it
}

// classifyStored runs on_enqueue on a stored message (in batch), with the values it was stored
// with as the producer's, and returns its classification; without a hook the stored values are
// kept.
func (a *actor) classifyStored(batch *hooks.Batch, m *engine.Message) (queuelog.Classification, error) {
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
		if c, err = batch.OnEnqueue(s, in); err != nil {
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

// redrive moves up to count dead-lettered messages (0 = all), oldest first, back to the queue,
// reclassifying them as mode says (concepts.md, "Dead-letter queues and redrive"). The scripts it
// runs share one budget of lua.request_budget_ms: once it is spent the rest stay in the
// dead-letter queue for the next Redrive.
func (a *actor) redrive(count uint64, mode Reclassify) (RedriveResult, error) {
	var res RedriveResult
	var items []queuelog.Redriven
	var budget scriptBudget
	budget.begin(time.Duration(a.b.currentDefaults().LuaRequestBudgetMs) * time.Millisecond)
	defer budget.end()
	batch := a.b.hooks.Batch()
	defer batch.Close()
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
			if !budget.left() { // the rest wait for the next Redrive
				return a.redriven(res, items)
			}
			start := time.Now()
			class, err := a.classifyStored(batch, &m)
			budget.add(time.Since(start))
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
	return a.redriven(res, items)
}

// redriven records a redrive's outcomes.
func (a *actor) redriven(res RedriveResult, items []queuelog.Redriven) (RedriveResult, error) {
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
