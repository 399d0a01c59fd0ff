package powerfail

import (
	"fmt"
	"sync"

	"github.com/filamq/fila/client/fila"
)

// ledger records what the server acknowledged, and the violations found against it. Safe for
// concurrent use.
type ledger struct {
	mu sync.Mutex
	// enqueued holds every message of the current round whose enqueue was answered Ok, by ID,
	// until the check after the next restart settles it.
	enqueued map[fila.MessageID]string
	// ackSent holds the messages of the current round an ack was sent for: an unanswered ack
	// may or may not have been applied, so such a message may be gone.
	ackSent map[fila.MessageID]bool
	// acked holds, for every round so far, the messages whose ack was answered Ok, with the
	// round: none of them may be delivered again.
	acked      map[fila.MessageID]int
	violations []violation
}

// violation is one broken promise of the server.
type violation struct {
	kind   string // "lost", "redelivered after ack", "corrupt", "queue lost", "not drained"
	round  int    // the round whose check (or load) found it
	id     fila.MessageID
	detail string
}

func (v violation) String() string {
	return fmt.Sprintf("round %d: %s %v: %s", v.round, v.kind, v.id, v.detail)
}

func newLedger() *ledger {
	return &ledger{
		enqueued: map[fila.MessageID]string{},
		ackSent:  map[fila.MessageID]bool{},
		acked:    map[fila.MessageID]int{},
	}
}

// enqueueOk records an enqueue the server answered Ok.
func (l *ledger) enqueueOk(id fila.MessageID, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.enqueued[id] = payload
}

// delivered checks a delivery in round: it must not have been acked before, and its payload
// must be the one enqueued.
func (l *ledger) delivered(round int, d *fila.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.acked[d.ID]; ok {
		l.violate(violation{kind: "redelivered after ack", round: round, id: d.ID,
			detail: fmt.Sprintf("its ack was answered Ok in round %d; payload %q, attempt %d", r, d.Payload, d.AttemptCount)})
	}
	if p, ok := l.enqueued[d.ID]; ok && p != string(d.Payload) {
		l.violate(violation{kind: "corrupt", round: round, id: d.ID, detail: fmt.Sprintf("delivered %q, enqueued %q", d.Payload, p)})
	}
}

// ackSending records that an ack for id is about to be sent.
func (l *ledger) ackSending(id fila.MessageID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ackSent[id] = true
}

// ackOk records an ack the server answered Ok in round.
func (l *ledger) ackOk(round int, id fila.MessageID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[id] = round
}

func (l *ledger) violate(v violation) { l.violations = append(l.violations, v) }

// settle ends a round's bookkeeping once everything stored has been drained: a message enqueued
// Ok that was neither drained nor sent an ack is lost. It returns how many were enqueued.
func (l *ledger) settle(round int, drained map[fila.MessageID]bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.enqueued)
	for id, p := range l.enqueued {
		if !drained[id] && !l.ackSent[id] {
			l.violate(violation{kind: "lost", round: round, id: id, detail: fmt.Sprintf("enqueue of %q was answered Ok", p)})
		}
	}
	l.enqueued, l.ackSent = map[fila.MessageID]string{}, map[fila.MessageID]bool{}
	return n
}

// found returns the violations recorded so far.
func (l *ledger) found() []violation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]violation(nil), l.violations...)
}
