package session

import (
	"sync"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/service"
)

// Out is a connection's outbound queue of encoded frames.
type Out interface {
	// Send queues a frame without blocking; onWritten, when not nil, runs once it has reached the
	// socket. false means the connection is gone or too far behind.
	Send(frame []byte, onWritten func()) bool
}

// Sink is the service.Sink of one subscription: it encodes ConsumeOk, Delivery and Error frames
// with its Consume's request ID onto its connection's Out.
type Sink struct {
	Out       Out
	RequestID uint32 // the Consume's: every frame of the subscription carries it
	// OnEnd, when not nil, is called when the service ends the subscription by itself, before
	// the Error frame that tells the consumer is queued: the connection forgets the
	// subscription (and what it counted for it) before the consumer can answer that frame.
	OnEnd func()
}

var _ service.Sink = Sink{}

// Subscribed sends the ConsumeOk that precedes a subscription's deliveries.
func (s Sink) Subscribed(consumerID string) {
	s.Out.Send(AppendFrame(nil, s.RequestID, &fibp.ConsumeOk{ConsumerID: consumerID}), nil)
}

// Deliver encodes ds as one Delivery frame (continuation frames when it exceeds the maximum
// frame size) and queues it; it keeps nothing of ds.
func (s Sink) Deliver(ds []service.Delivery, onWritten func()) bool {
	return s.Out.Send(AppendDelivery(nil, s.RequestID, ds), onWritten)
}

// Ended tells the consumer that the service ended the subscription: an Error frame with the
// Consume's request ID.
func (s Sink) Ended(e *service.Error) {
	if s.OnEnd != nil {
		s.OnEnd()
	}
	s.Out.Send(AppendFrame(nil, s.RequestID, ErrorFrame(e)), nil)
}

// scratch recycles the frame-typed copies of delivery batches.
var scratch = sync.Pool{New: func() any { return new(fibp.Delivery) }}

// AppendDelivery appends the Delivery frame of ds for subscription requestID to dst (continuation
// frames when it exceeds the maximum frame size). A nil dst is allocated at the frame's size.
func AppendDelivery(dst []byte, requestID uint32, ds []service.Delivery) []byte {
	f := scratch.Get().(*fibp.Delivery)
	msgs := f.Messages[:0]
	for i := range ds {
		d := &ds[i]
		msgs = append(msgs, fibp.DeliveryMessage{
			MessageID:      wire.UUID(d.ID),
			Queue:          d.Queue,
			Headers:        d.Headers,
			Payload:        d.Payload,
			FairnessKey:    d.FairnessKey,
			Weight:         d.Weight,
			AttemptCount:   d.Attempt,
			RedriveCount:   d.RedriveCount,
			EnqueuedAt:     uint64(d.EnqueuedAt),
			LeasedAt:       uint64(d.LeasedAt),
			LeaseExpiresAt: uint64(d.ExpiresAt),
		})
	}
	f.Messages = msgs
	dst = AppendFrame(dst, requestID, f)
	clear(msgs)
	f.Messages = msgs[:0]
	scratch.Put(f)
	return dst
}
