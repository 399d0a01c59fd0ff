package chaos

import (
	"fmt"
	"sort"
	"time"
)

// checkDuplicate finds an idempotency key that made two messages: two of its enqueues answered
// Ok with different message IDs, or (when none was answered with an ID) its deliveries of two
// different message IDs. Only enqueues within DedupWindow of the key's first invocation count.
// A delivery of another ID than the one answered is reported by checkDelivery.
func (r *Report) checkDuplicate(m *message, faults []*Op) {
	first := m.first()
	if first == nil || first.Key == "" {
		return
	}
	within := func(op *Op) bool { return op.Complete-first.Invoke < DedupWindow }
	if said := m.okWithID(); said != nil {
		for _, e := range m.enqueues {
			if e.Outcome == Ok && e.ID != "" && e.ID != said.ID && within(e) {
				r.violate(Violation{Rule: RuleDuplicate, Op: *e, Cause: said, Faults: between(faults, said.Complete, e.Invoke),
					Detail: "a repeat of the idempotency key " + first.Key + " answered with another message ID"})
			}
		}
		return
	}
	ref := m.firstDelivery()
	for _, d := range m.deliveries { // by lease
		if d.ID != ref.ID && within(d) {
			r.violate(Violation{Rule: RuleDuplicate, Op: *d, Cause: ref, Faults: between(faults, ref.Complete, d.Invoke),
				Detail: "the idempotency key " + first.Key + "'s message delivered under two message IDs"})
			return
		}
	}
}

// okWithID is the enqueue answered Ok with an ID first (nil: none).
func (m *message) okWithID() *Op {
	var ok *Op
	for _, e := range m.enqueues {
		if e.Outcome == Ok && e.ID != "" && (ok == nil || e.Complete < ok.Complete) {
			ok = e
		}
	}
	return ok
}

// firstDelivery is the message's delivery leased first (nil: never delivered).
func (m *message) firstDelivery() *Op {
	var f *Op
	for _, d := range m.deliveries {
		if f == nil || d.Invoke < f.Invoke {
			f = d
		}
	}
	return f
}

// checkOrder checks every ordering group: a message is not delivered for the first time before
// every message of its group whose enqueue was answered Ok before its own was invoked has been
// delivered at least once (leased no later than it). See the package documentation for why the
// rule is on first deliveries.
func (r *Report) checkOrder(msgs map[string]*message, faults []*Op) {
	groups := map[string][]*message{}
	for _, m := range msgs {
		if e := m.first(); e != nil && e.Group != "" {
			groups[e.Group] = append(groups[e.Group], m)
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		r.checkGroup(groups[g], faults)
	}
}

// checkGroup checks one ordering group's messages.
func (r *Report) checkGroup(ms []*message, faults []*Op) {
	// The predecessors, by the answer of their enqueue, each with the latest first delivery of
	// those answered before it (never delivered: forever).
	type pred struct {
		m        *message
		answered time.Duration
	}
	var preds []pred
	for _, m := range ms {
		if ok := m.ok(); ok != nil {
			preds = append(preds, pred{m, ok.Complete})
		}
	}
	sort.Slice(preds, func(i, j int) bool { return preds[i].answered < preds[j].answered })
	const never = time.Duration(1<<63 - 1)
	latest := make([]time.Duration, len(preds)) // latest first delivery among preds[:i+1]
	which := make([]*message, len(preds))
	for i, p := range preds {
		at := never
		if d := p.m.firstDelivery(); d != nil {
			at = d.Invoke
		}
		latest[i], which[i] = at, p.m
		if i > 0 && latest[i-1] >= at {
			latest[i], which[i] = latest[i-1], which[i-1]
		}
	}
	for _, m := range ms {
		d := m.firstDelivery()
		if d == nil {
			continue
		}
		invoked := m.first().Invoke
		n := sort.Search(len(preds), func(i int) bool { return preds[i].answered >= invoked })
		if n == 0 || latest[n-1] <= d.Invoke {
			continue
		}
		a := which[n-1]
		detail := fmt.Sprintf("first delivered before %s of its group, enqueued and answered Ok before it was sent, ", a.first().Value)
		if latest[n-1] == never {
			detail += "which was never delivered"
		} else {
			detail += fmt.Sprintf("which was first delivered at %v", latest[n-1].Round(time.Millisecond))
		}
		r.violate(Violation{Rule: RuleOrder, Op: *d, Cause: a.ok(), Detail: detail,
			Faults: between(faults, a.ok().Complete, d.Invoke)})
	}
}
