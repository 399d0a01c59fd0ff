package fila

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// MessageID is a broker-assigned UUIDv7; String renders the canonical 36-character form.
type MessageID = wire.UUID

// ParseMessageID parses the canonical form of a message ID.
func ParseMessageID(s string) (MessageID, error) { return wire.ParseUUID(s) }

// Message is one message to enqueue. Zero values of the optional fields mean "absent": the
// queue's default (or its on_enqueue hook) decides. Payload is not copied: it must not change
// until the Enqueue or Send returns, or a SendAsync's Pending completes.
type Message struct {
	Queue          string
	Headers        map[string]string
	Payload        []byte
	FairnessKey    string        // "" = absent
	Weight         uint32        // 0 = absent
	Delay          time.Duration // 0 = deliverable immediately; negative is refused (ErrNegativeDelay)
	IdempotencyKey string        // "" = absent
}

// ErrNegativeDelay reports a Message whose Delay is negative: FIBP's delay is unsigned, and
// sending such a message as an immediate one would hide a mistake (a deadline already past, a
// subtraction the wrong way round). Nothing of the call is sent.
var ErrNegativeDelay = errors.New("fila: Enqueue: a message's Delay is negative (0 = deliverable immediately)")

// check refuses what the wire form cannot say.
func (m *Message) check() error {
	if m.Delay < 0 {
		return fmt.Errorf("%w: %v", ErrNegativeDelay, m.Delay)
	}
	return nil
}

func (m *Message) wire() fibp.EnqueueMessage {
	em := fibp.EnqueueMessage{Queue: m.Queue, Headers: m.Headers, Payload: m.Payload}
	if m.FairnessKey != "" {
		em.FairnessKey = wire.Some(m.FairnessKey)
	}
	if m.Weight != 0 {
		em.Weight = wire.Some(m.Weight)
	}
	if m.Delay > 0 {
		em.DelayMs = wire.Some(durationMs(m.Delay))
	}
	if m.IdempotencyKey != "" {
		em.IdempotencyKey = wire.Some(m.IdempotencyKey)
	}
	return em
}

// EnqueueResult is the outcome of one message of an Enqueue.
type EnqueueResult struct {
	ID        MessageID // zero when Err is set; the original's ID for a duplicate
	Duplicate bool      // matched a remembered deduplication key; nothing was enqueued
	Err       error     // per-message failure, an *Error (QueueNotFound, ScriptError, ...)
}

// Enqueue sends msgs in one Enqueue frame and returns one result per message, in order. The
// error is set only when the whole frame failed (an Error frame, a broken connection, ctx);
// a frame refused with ChannelFull is retried as Options.ChannelFullRetries allows.
func (c *Client) Enqueue(ctx context.Context, msgs ...Message) ([]EnqueueResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for i := range msgs {
		if err := msgs[i].check(); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	msgs = injectAll(c.opts.Propagator, ctx, msgs)
	req := &fibp.Enqueue{Messages: make([]fibp.EnqueueMessage, len(msgs))}
	for i := range msgs {
		req.Messages[i] = msgs[i].wire()
	}
	res, err := c.enqueueFrame(ctx, req, nil, false)
	if err != nil {
		return nil, err
	}
	return enqueueResults(req, res), nil
}

// enqueueFrame sends req (unless cl is its call, already started) and waits for the answer,
// backing off and sending it again while the whole frame is refused with ChannelFull
// (exponential backoff, at least the server's retry_after_ms). With resend, a frame whose
// connection dropped before the answer is sent again once the client has reconnected.
func (c *Client) enqueueFrame(ctx context.Context, req *fibp.Enqueue, cl *call, resend bool) (*fibp.EnqueueResult, error) {
	backoff := c.opts.ChannelFullBackoff
	for attempt := 0; ; {
		var fr fibp.Frame
		var err error
		if cl == nil {
			cl, err = c.start(ctx, req, fibp.OpEnqueueResult, nil)
		}
		if err == nil {
			fr, err = c.await(ctx, cl)
			cl = nil
		}
		if err == nil {
			return fr.(*fibp.EnqueueResult), nil
		}
		if resend && c.opts.MaxReconnects != 0 && isLinkFailure(err) && c.Err() == nil {
			c.log.Debug("fila: resending an unanswered Enqueue", "messages", len(req.Messages), "err", err)
			continue // start waits for the next connection
		}
		if attempt >= c.opts.ChannelFullRetries || !errors.Is(err, ErrChannelFull) {
			return nil, err
		}
		attempt++
		wait := backoff
		if ra, ok := RetryAfter(err); ok && ra > wait {
			wait = ra
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-c.done:
			t.Stop()
			return nil, c.closedErr()
		}
		backoff = min(2*backoff, maxChannelFullBackoff)
	}
}

func enqueueResults(req *fibp.Enqueue, res *fibp.EnqueueResult) []EnqueueResult {
	out := make([]EnqueueResult, len(req.Messages))
	enqueueResultsInto(out, req, res)
	return out
}

// enqueueResultsInto is enqueueResults into out, which has one element per message of req.
func enqueueResultsInto(out []EnqueueResult, req *fibp.Enqueue, res *fibp.EnqueueResult) {
	for i := range out {
		if i >= len(res.Results) {
			out[i].Err = invalidFrame("EnqueueResult has %d results for %d messages",
				len(res.Results), len(req.Messages))
			continue
		}
		r := &res.Results[i]
		out[i] = EnqueueResult{ID: r.MessageID, Duplicate: r.Duplicate, Err: enqueueError(r.ErrorCode, req.Messages[i].Queue)}
	}
}

// enqueueError is the error of one message's result. A Forbidden item carries no message on the
// wire, but its cause is known: the key lacks produce on the queue (a request whose every message
// is refused is answered with an Error frame that also names the key).
func enqueueError(code fibp.ErrorCode, queue string) error {
	switch code {
	case fibp.CodeOk: // before the subject is formatted: every accepted message comes here
		return nil
	case fibp.CodeForbidden:
		return &Error{Code: code, Message: "the API key has no produce permission on " + queueSubject(queue)}
	}
	return resultError(code, queueSubject(queue))
}

// checkMessage reports a message the protocol cannot carry.
func checkMessage(m *fibp.EnqueueMessage) error {
	if err := m.Check(); err != nil {
		return fmt.Errorf("fila: Enqueue: %w", err)
	}
	return nil
}
