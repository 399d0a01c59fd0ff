package fila

import (
	"bytes"
	"context"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Delivery is one leased message. Its fields are plain data owned by the caller (the payload is
// copied out of the connection's buffer). Do not copy a Delivery; pass the pointer.
//
// A delivery is "finished" once it is acked or nacked, or its lease is known to be lost; each
// finished delivery grants its subscription one more credit.
type Delivery struct {
	ID             MessageID
	Queue          string
	Headers        map[string]string // from a dead-letter queue, with the HeaderDeadLetter* ones too
	Payload        []byte
	FairnessKey    string
	Weight         uint32
	AttemptCount   uint32 // 1 on the first delivery; reset by redrive
	RedriveCount   uint32 // times redriven from the dead-letter queue
	EnqueuedAt     time.Time
	LeasedAt       time.Time
	LeaseExpiresAt time.Time // as delivered; a lower bound (see Extend for later expiries)

	c        *Client
	sub      *Consumer
	gen      uint32 // sub's generation when it arrived
	finished atomic.Bool
	lost     chan struct{}

	// Lease keep-alive state on the local clock, guarded by the client's leaseTable.mu.
	keepAlive bool
	extendBy  time.Duration
	expires   time.Time
	due       time.Time
	keepUntil time.Time // keep-alive ends here (ConsumeOptions.MaxLeaseExtension); zero = never
}

func newDelivery(c *Client, sub *Consumer, m *fibp.DeliveryMessage) *Delivery {
	return &Delivery{
		ID:             m.MessageID,
		Queue:          m.Queue,
		Headers:        m.Headers,
		Payload:        bytes.Clone(m.Payload),
		FairnessKey:    m.FairnessKey,
		Weight:         m.Weight,
		AttemptCount:   m.AttemptCount,
		RedriveCount:   m.RedriveCount,
		EnqueuedAt:     msTime(m.EnqueuedAt),
		LeasedAt:       msTime(m.LeasedAt),
		LeaseExpiresAt: msTime(m.LeaseExpiresAt),
		c:              c,
		sub:            sub,
		gen:            subGen(sub),
		lost:           make(chan struct{}),
		keepAlive:      sub != nil && sub.keepAlive,
	}
}

// Ack acknowledges the message. Concurrent acks on one client are coalesced into Ack frames.
// The error is the item's result (ErrMessageNotFound when the lease had already ended), or the
// whole request's failure.
//
// A Delivery of a Cluster's Consumer whose node is gone or no longer leads the queue is acked
// at the queue's current leader instead.
func (d *Delivery) Ack(ctx context.Context) error {
	err := d.c.acks.submit(ctx, fibp.AckItem{Queue: d.Queue, MessageID: d.ID}, d)
	if r := d.c.router; r != nil && r.rerouteable(err) {
		return firstErr(r.Ack(ctx, AckItem{Queue: d.Queue, ID: d.ID}))
	}
	return err
}

// Nack reports a failed attempt. errText reaches the queue's on_failure hook as msg.error;
// retryAfter, when non-nil, sets the retry delay (overriding hook and backoff). Concurrent
// nacks on one client are coalesced into Nack frames.
func (d *Delivery) Nack(ctx context.Context, errText string, retryAfter *time.Duration) error {
	item := fibp.NackItem{Queue: d.Queue, MessageID: d.ID, Error: errText}
	if retryAfter != nil {
		item.RetryAfterMs = wire.Some(durationMs(*retryAfter))
	}
	err := d.c.nacks.submit(ctx, item, d)
	if r := d.c.router; r != nil && r.rerouteable(err) {
		return firstErr(r.Nack(ctx, NackItem{Queue: d.Queue, ID: d.ID, Error: errText, RetryAfter: retryAfter}))
	}
	return err
}

// Extend sets the lease to expire by from now, returning the new expiry. When keep-alive is on
// it continues from the new expiry.
func (d *Delivery) Extend(ctx context.Context, by time.Duration) (time.Time, error) {
	item := ExtendLeaseItem{Queue: d.Queue, ID: d.ID, By: by}
	res, err := d.c.ExtendLease(ctx, item)
	if r := d.c.router; r != nil && (r.rerouteable(err) || err == nil && r.rerouteable(res[0].Err)) {
		res, err = r.ExtendLease(ctx, item)
	}
	if err != nil {
		return time.Time{}, err
	}
	return res[0].ExpiresAt, res[0].Err
}

// LeaseLost is closed when the SDK learns that the lease ended before an ack or nack: an
// ExtendLease answered MessageNotFound, or the lease ran out locally. Work on the message should
// stop; another consumer may hold it now.
func (d *Delivery) LeaseLost() <-chan struct{} { return d.lost }

func subGen(s *Consumer) uint32 {
	if s == nil {
		return 0
	}
	return s.gen.Load()
}
