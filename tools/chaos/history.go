package chaos

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind uint8

const (
	// Enqueue of one message whose payload is Value; ID is the broker's answer when Ok.
	Enqueue Kind = iota + 1
	// Deliver is a delivery: Invoke is when the broker leased it (its leased_at, on the
	// recorder's clock: the broker and the workload share the machine's), Complete when the
	// consumer took it.
	Deliver
	// Ack of the message Value (ID).
	Ack
	// Drained records the end of the final drain: every message still deliverable when it was
	// invoked was delivered (with Final set) before it completed. Ok: the queue was then empty;
	// Fail: it still counted messages it did not deliver (Err says how many), a violation; Unknown:
	// the drain could not finish, and without it the checker does not look for lost messages.
	Drained
	// Fault is the nemesis at work from Invoke (injected) to Complete (healed); Value describes it.
	Fault
	// Subscribe is a consumer's subscription that failed or ended, from the Consume call to its
	// end (Err why). The checker ignores it; Explain shows it.
	Subscribe
	// Dial is a node the workload's router could not use for Queue: its dial (Value the
	// address) failed, or its client was reconnecting (Node its ID). The checker ignores it;
	// Explain shows it.
	Dial
)

func (k Kind) String() string {
	switch k {
	case Enqueue:
		return "enqueue"
	case Deliver:
		return "deliver"
	case Ack:
		return "ack"
	case Drained:
		return "drained"
	case Fault:
		return "fault"
	case Subscribe:
		return "subscribe"
	case Dial:
		return "dial"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Outcome is how an operation was answered.
type Outcome uint8

const (
	// Ok: the broker answered success.
	Ok Outcome = iota + 1
	// Fail: the broker answered an error; the operation did not take effect.
	Fail
	// Unknown: no answer (a lost connection, a timeout); it may or may not have taken effect.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Ok:
		return "ok"
	case Fail:
		return "fail"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", o)
}

// Op is one operation of a history. Times are offsets from the history's start on one
// monotonic clock, so that operations of different clients compare.
type Op struct {
	Index    int // position in the history (set by Recorder.History and Check)
	Client   int // who did it (the nemesis is -1)
	Kind     Kind
	Value    string // the message's payload, unique per enqueue (but repeats: Key); a Fault's description
	ID       string // the broker's message ID (Enqueue answered Ok, Deliver, Ack)
	Outcome  Outcome
	Invoke   time.Duration
	Complete time.Duration
	Final    bool   // a Deliver or Ack of the final drain
	Err      string // the error of a Fail or Unknown
	Queue    string // the queue of an Enqueue, Deliver or Subscribe
	Node     uint64 // the node the client's connection led to when the call was made (0: unknown)
	Leader   string // the leader_addr a NotLeader answer named, if any
	Group    string // an Enqueue's ordering group, on a queue ordered by group ("": none)
	Seq      int    // an Enqueue's position in its group, as its producer numbered it (shown only)
	Key      string // an Enqueue's idempotency key: enqueues of one Value with one Key are one message
}

func (o Op) String() string {
	s := fmt.Sprintf("#%d %s", o.Index, o.Kind)
	if o.Value != "" {
		s += " " + o.Value
	}
	if o.ID != "" {
		s += " id=" + o.ID
	}
	if o.Group != "" {
		s += fmt.Sprintf(" group %s #%d", o.Group, o.Seq)
	}
	if o.Key != "" {
		s += " key " + o.Key
	}
	if o.Kind == Deliver {
		s += fmt.Sprintf(" leased at %v, taken at %v by client %d", o.Invoke.Round(time.Millisecond), o.Complete.Round(time.Millisecond), o.Client)
	} else {
		s += fmt.Sprintf(" [%v, %v] %s", o.Invoke.Round(time.Millisecond), o.Complete.Round(time.Millisecond), o.Outcome)
		if o.Kind != Fault {
			s += fmt.Sprintf(" by client %d", o.Client)
		}
	}
	if o.Final {
		s += " (final drain)"
	}
	if o.Err != "" {
		s += ": " + o.Err
	}
	return s
}

// Recorder collects a history from many goroutines.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the current offset on the history's clock.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// At is a wall-clock time (a broker's timestamp) on the history's clock.
func (r *Recorder) At(t time.Time) time.Duration { return t.Sub(r.start) }

// Add appends a completed operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// History returns the operations so far ordered by invocation, each with its Index.
func (r *Recorder) History() []Op {
	r.mu.Lock()
	h := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(h, func(i, j int) bool { return h[i].Invoke < h[j].Invoke })
	for i := range h {
		h[i].Index = i
	}
	return h
}
