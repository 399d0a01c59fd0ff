package broker

import (
	"maps"
	"strconv"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/service"
)

// The headers a delivery (or a peek) of a dead-lettered message carries besides its own, saying
// why it is in the dead-letter queue (service's Header… constants, docs/dead-letter.md). The
// broker adds them while the message is there, from what the dead-letter lane keeps with it
// (queuegroup.DeadLetter); a message's own headers of the same names are replaced.
const (
	HeaderDeadLetterReason   = service.HeaderDeadLetterReason
	HeaderDeadLetterError    = service.HeaderDeadLetterError
	HeaderDeadLetterQueue    = service.HeaderDeadLetterQueue
	HeaderDeadLetterAttempts = service.HeaderDeadLetterAttempts
	HeaderDeadLetterAt       = service.HeaderDeadLetterAt
)

// Reasons the broker's queue limits give a dead-letter, beside engine.ReasonMaxAttempts,
// engine.ReasonScript and queuegroup.ReasonUnclassified.
const (
	ReasonExpired  = "expired"   // older than the queue's retention_ms
	ReasonMaxDepth = "max_depth" // dropped as the oldest of a full queue (dead_letter_oldest)
)

// deadLetterNote is why a message being delivered from a dead-letter queue is there.
type deadLetterNote struct {
	queuegroup.DeadLetter
	queue string // the queue it came from
}

// deadLetterNoteOf returns why message id of lane l is in the dead-letter queue; nil unless l is
// the dead-letter lane and it knows.
func (a *actor) deadLetterNoteOf(l queuegroup.Lane, id engine.MsgID) *deadLetterNote {
	if l != queuegroup.LaneDeadLetter {
		return nil
	}
	d, ok := a.st.DeadLettered(id)
	if !ok {
		return nil
	}
	return &deadLetterNote{DeadLetter: d, queue: a.lanes[queuegroup.LaneQueue].public}
}

// headers returns a copy of headers (the body cache's, never changed) with the dead-letter
// headers added; headers itself for a nil note.
func (n *deadLetterNote) headers(headers map[string]string) map[string]string {
	if n == nil {
		return headers
	}
	h := make(map[string]string, len(headers)+5)
	maps.Copy(h, headers)
	if n.Reason != "" {
		h[HeaderDeadLetterReason] = n.Reason
	}
	h[HeaderDeadLetterError] = n.Error
	h[HeaderDeadLetterQueue] = n.queue
	h[HeaderDeadLetterAttempts] = strconv.FormatUint(uint64(n.Attempts), 10)
	h[HeaderDeadLetterAt] = strconv.FormatInt(n.At, 10)
	return h
}
