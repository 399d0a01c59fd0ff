package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Rules the checker enforces (Violation.Rule).
const (
	RuleLost                = "lost"
	RuleRedeliveredAfterAck = "redelivered after ack"
	RulePhantom             = "phantom"
	RuleNotDrained          = "not drained"
	RuleOrder               = "order"
	RuleDuplicate           = "duplicate"
)

// DedupWindow is how long the checker takes a queue to remember an idempotency key: two
// enqueues of one key are one message when the later one was answered within it of the first's
// invocation (the broker's default, 5 minutes).
var DedupWindow = 5 * time.Minute

// UnavailableGap is the shortest pause in successful enqueues, or in deliveries, that
// Figures.Unavailable reports as a window.
var UnavailableGap = 500 * time.Millisecond

// Violation is a broken promise, naming the operation that shows it.
type Violation struct {
	Rule   string
	Op     Op     // the enqueue that was lost, the delivery that should not have happened
	Cause  *Op    // what Op contradicts: the ack answered Ok before a redelivery, the earlier enqueue of the group, the first answer of the key; nil otherwise
	Faults []Op   // the faults that fell between the promise and the evidence against it
	Detail string // what the checker saw
}

func (v Violation) String() string {
	s := v.Rule + ": " + v.Op.String()
	if v.Cause != nil {
		s += "; after " + v.Cause.String()
	}
	if v.Detail != "" {
		s += "; " + v.Detail
	}
	if len(v.Faults) > 0 {
		f := make([]string, len(v.Faults))
		for i, op := range v.Faults {
			f[i] = fmt.Sprintf("%s at %v", op.Value, op.Invoke.Round(time.Millisecond))
		}
		s += "; faults in between (answered before the commit?): " + strings.Join(f, ", ")
	}
	return s
}

// Window is a span in which an operation kind succeeded nowhere.
type Window struct {
	What       string // "enqueue" or "deliver"
	Start, End time.Duration
}

// Figures are a history's counts.
type Figures struct {
	Operations          int // client operations: enqueues, deliveries, acks (final drain included)
	Enqueued            int // enqueues answered Ok
	EnqueueFailed       int // enqueues answered with an error
	EnqueueUnknown      int // enqueues not answered, or answered NotLeader or NodeNotReady (outcome unknown)
	Delivered           int // deliveries (final drain included)
	Acked               int // acks answered Ok
	AckUnknown          int // acks not answered, or answered NotLeader or NodeNotReady (outcome unknown)
	StillStored         int // distinct messages delivered by the final drain
	Duplicated          int // messages delivered more than once (at-least-once redeliveries)
	Faults              int
	Lost                int
	RedeliveredAfterAck int // deliveries after an ack of the message was answered Ok
	Phantom             int
	Repeats             int      // enqueues of an idempotency key already sent, answered Ok
	OutOfOrder          int      // first deliveries before an earlier message of their group was delivered
	Duplicate           int      // idempotency keys that made two messages
	Unavailable         []Window // pauses of at least UnavailableGap, final drain excluded
}

// LongestUnavailable is the longest window of Unavailable (0 if none).
func (f Figures) LongestUnavailable() time.Duration {
	var d time.Duration
	for _, w := range f.Unavailable {
		d = max(d, w.End-w.Start)
	}
	return d
}

func (f Figures) String() string {
	return fmt.Sprintf("operations %d (enqueued %d, failed %d, unknown %d; delivered %d; acked %d, unknown %d), "+
		"faults %d, still stored at the end %d, lost %d, duplicated %d, redelivered after ack %d, phantom %d, "+
		"repeats %d, out of order %d, duplicate %d, unavailability windows %d (longest %v)",
		f.Operations, f.Enqueued, f.EnqueueFailed, f.EnqueueUnknown, f.Delivered, f.Acked, f.AckUnknown,
		f.Faults, f.StillStored, f.Lost, f.Duplicated, f.RedeliveredAfterAck, f.Phantom,
		f.Repeats, f.OutOfOrder, f.Duplicate, len(f.Unavailable), f.LongestUnavailable().Round(time.Millisecond))
}

// Report is the checker's verdict.
type Report struct {
	Figures
	Drained    bool // the history ends with a finished drain: lost messages were looked for
	Violations []Violation
}

// OK reports a history without violations.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// message gathers a value's operations: its enqueues (more than one when the producer sent its
// idempotency key again), deliveries and acks.
type message struct {
	enqueues   []*Op // by invocation
	deliveries []*Op
	acks       []*Op
}

// first is the message's first enqueue (nil: none recorded).
func (m *message) first() *Op {
	if len(m.enqueues) == 0 {
		return nil
	}
	return m.enqueues[0]
}

// ok is the enqueue of the message answered Ok first (nil: none).
func (m *message) ok() *Op {
	var ok *Op
	for _, e := range m.enqueues {
		if e.Outcome == Ok && (ok == nil || e.Complete < ok.Complete) {
			ok = e
		}
	}
	return ok
}

// oneWindow reports whether every enqueue of the message was answered within DedupWindow of
// the first one's invocation (so a key made one message at most).
func (m *message) oneWindow() bool {
	for _, e := range m.enqueues {
		if e.Complete-m.enqueues[0].Invoke >= DedupWindow {
			return false
		}
	}
	return true
}

// refused reports a message whose every enqueue was refused.
func (m *message) refused() bool {
	for _, e := range m.enqueues {
		if e.Outcome != Fail {
			return false
		}
	}
	return len(m.enqueues) > 0
}

// answered reports whether id is what an enqueue answered Ok said (or none said anything).
func (m *message) answered(id string) bool {
	said := false
	for _, e := range m.enqueues {
		if e.Outcome == Ok && e.ID != "" {
			if e.ID == id {
				return true
			}
			said = true
		}
	}
	return !said
}

// Check checks a history (any order; each Op's Index is set to its position by invocation).
func Check(history []Op) Report {
	h := append([]Op(nil), history...)
	sort.SliceStable(h, func(i, j int) bool { return h[i].Invoke < h[j].Invoke })
	var r Report
	var faults []*Op
	msgs := map[string]*message{}
	get := func(v string) *message {
		m := msgs[v]
		if m == nil {
			m = &message{}
			msgs[v] = m
		}
		return m
	}
	for i := range h {
		op := &h[i]
		op.Index = i
		switch op.Kind {
		case Enqueue:
			r.Operations++
			switch op.Outcome {
			case Ok:
				r.Enqueued++
			case Fail:
				r.EnqueueFailed++
			default:
				r.EnqueueUnknown++
			}
			m := get(op.Value)
			if e := m.first(); e != nil {
				if op.Key == "" || op.Key != e.Key {
					r.Violations = append(r.Violations, Violation{Rule: RulePhantom, Op: *op,
						Detail: "the workload enqueued this value twice (" + e.String() + "); values must be unique, or repeats of one idempotency key"})
					continue
				}
				if op.Outcome == Ok {
					r.Repeats++
				}
			}
			m.enqueues = append(m.enqueues, op)
		case Deliver:
			r.Operations++
			r.Delivered++
			m := get(op.Value)
			m.deliveries = append(m.deliveries, op)
		case Ack:
			r.Operations++
			switch op.Outcome {
			case Ok:
				r.Acked++
			case Unknown:
				r.AckUnknown++
			}
			m := get(op.Value)
			m.acks = append(m.acks, op)
		case Drained:
			switch op.Outcome {
			case Ok:
				r.Drained = true
			case Fail:
				r.Drained = true
				r.Violations = append(r.Violations, Violation{Rule: RuleNotDrained, Op: *op, Detail: op.Err})
			}
		case Fault:
			r.Faults++
			faults = append(faults, op)
		}
	}
	for _, m := range msgs {
		r.checkMessage(m, faults)
		r.checkDuplicate(m, faults)
	}
	r.checkOrder(msgs, faults)
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].Op.Index < r.Violations[j].Op.Index })
	r.Unavailable = unavailable(h)
	return r
}

func (r *Report) violate(v Violation) {
	switch v.Rule {
	case RuleLost:
		r.Lost++
	case RuleRedeliveredAfterAck:
		r.RedeliveredAfterAck++
	case RulePhantom:
		r.Phantom++
	case RuleOrder:
		r.OutOfOrder++
	case RuleDuplicate:
		r.Duplicate++
	}
	r.Violations = append(r.Violations, v)
}

func (r *Report) checkMessage(m *message, faults []*Op) {
	if len(m.deliveries) > 1 {
		r.Duplicated++
	}
	final := false
	for _, d := range m.deliveries {
		if d.Final {
			final = true
		}
		r.checkDelivery(m, d)
	}
	if final {
		r.StillStored++
	}
	// The first ack answered Ok ends the message: nothing may be delivered after its answer.
	var acked *Op
	mayBeAcked := false
	for _, a := range m.acks {
		switch a.Outcome {
		case Ok:
			mayBeAcked = true
			if acked == nil || a.Complete < acked.Complete {
				acked = a
			}
		case Unknown:
			mayBeAcked = true
		}
	}
	if acked != nil {
		for _, d := range m.deliveries {
			if d.Invoke > acked.Complete {
				r.violate(Violation{Rule: RuleRedeliveredAfterAck, Op: *d, Cause: acked,
					Faults: between(faults, acked.Complete, d.Invoke)})
			}
		}
	}
	if ok := m.ok(); r.Drained && ok != nil && !mayBeAcked && !final {
		detail := "never delivered"
		end := time.Duration(1<<63 - 1)
		if n := len(m.deliveries); n > 0 {
			detail = fmt.Sprintf("delivered %d times, never acked, and not stored at the end", n)
		}
		r.violate(Violation{Rule: RuleLost, Op: *ok, Detail: detail,
			Faults: between(faults, ok.Complete, end)})
	}
}

func (r *Report) checkDelivery(m *message, d *Op) {
	e := m.first()
	switch {
	case e == nil:
		r.violate(Violation{Rule: RulePhantom, Op: *d, Detail: "no enqueue of this value"})
	case d.Complete < e.Invoke:
		r.violate(Violation{Rule: RulePhantom, Op: *d, Detail: "delivered before its enqueue " + e.String()})
	case m.refused():
		r.violate(Violation{Rule: RulePhantom, Op: *d, Detail: "its enqueue was refused: " + e.String()})
	case !m.answered(d.ID) && e.Key != "" && !m.oneWindow():
		// a repeat past the dedup window may have made another message: no telling which
	case !m.answered(d.ID) && e.Key != "":
		r.violate(Violation{Rule: RuleDuplicate, Op: *d, Cause: m.ok(),
			Detail: "delivered as another message than the one its idempotency key's enqueue was answered with"})
	case !m.answered(d.ID):
		r.violate(Violation{Rule: RulePhantom, Op: *d, Detail: "its enqueue was answered with another ID: " + m.ok().String()})
	}
}

// between returns the faults that started in (from, to) or were still going on at from.
func between(faults []*Op, from, to time.Duration) []Op {
	var out []Op
	for _, f := range faults {
		if f.Invoke < to && f.Complete > from {
			out = append(out, *f)
		}
	}
	return out
}

// unavailable finds the pauses of at least UnavailableGap between successful enqueues and
// between deliveries, over the span of the workload (final drain excluded).
func unavailable(h []Op) []Window {
	var enq, del []time.Duration
	var end time.Duration
	for _, op := range h {
		if op.Final || op.Kind == Fault || op.Kind == Drained {
			continue
		}
		end = max(end, op.Complete)
		switch {
		case op.Kind == Enqueue && op.Outcome == Ok:
			enq = append(enq, op.Complete)
		case op.Kind == Deliver:
			del = append(del, op.Invoke)
		}
	}
	var out []Window
	for _, s := range []struct {
		what  string
		times []time.Duration
	}{{"enqueue", enq}, {"deliver", del}} {
		sort.Slice(s.times, func(i, j int) bool { return s.times[i] < s.times[j] })
		last := time.Duration(-1)
		for _, t := range append(s.times, end) {
			if last >= 0 && t-last >= UnavailableGap {
				out = append(out, Window{What: s.what, Start: last, End: t})
			}
			last = t
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}
