package session

import (
	"sync"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// Out is a connection's outbound queue of encoded frames.
type Out interface {
	// Send queues a frame without blocking; onWritten, when not nil, runs once it has reached the
	// socket. false means the connection is gone or too far behind.
	Send(frame []byte, onWritten func()) bool
}

// Sink is the broker.Sink of one connection: it encodes ConsumeOk and Delivery frames onto Out.
type Sink struct{ Out Out }

var _ broker.Sink = Sink{}

// Subscribed sends the ConsumeOk that precedes a subscription's deliveries.
func (s Sink) Subscribed(requestID uint32, consumerID string) {
	s.Out.Send(AppendFrame(nil, requestID, &fibp.ConsumeOk{ConsumerID: consumerID}), nil)
}

// Deliver encodes ds as one Delivery frame (continuation frames when it exceeds the maximum
// frame size) and queues it; it keeps nothing of ds.
func (s Sink) Deliver(requestID uint32, ds []broker.Delivery, onWritten func()) bool {
	return s.Out.Send(AppendDelivery(nil, requestID, ds), onWritten)
}

// scratch recycles the frame-typed copies of delivery batches.
var scratch = sync.Pool{New: func() any { return new(fibp.Delivery) }}

// AppendDelivery appends the Delivery frame of ds for subscription requestID to dst (continuation
// frames when it exceeds the maximum frame size). A nil dst is allocated at the frame's size.
func AppendDelivery(dst []byte, requestID uint32, ds []broker.Delivery) []byte {
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
