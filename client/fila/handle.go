package fila

import (
	"context"
	"sync"
	"time"
)

// Handler processes one delivery for Consumer.Consume. Returning nil acks the message; returning
// an error nacks it with the error's text (the queue's retry policy decides what follows). ctx
// is cancelled when the delivery's lease is lost (Delivery.LeaseLost): the handler should stop,
// and the message is then neither acked nor nacked. With Options.Propagator set, ctx carries the
// producer's trace (Delivery.TraceContext). A panic is not recovered.
type Handler func(ctx context.Context, d *Delivery) error

// handlerSettleTimeout bounds the Ack or Nack that follows a handler (it may wait for a
// reconnection).
const handlerSettleTimeout = 30 * time.Second

// Consume runs handler on the subscription's deliveries, at most concurrency (at least 1) at a
// time, until ctx ends or the subscription stops. It then waits for the running handlers (their
// acks and nacks included) and returns why it stopped: ctx's error, or the subscription's (for
// example ErrConsumerClosed after Close). Ending ctx does not cancel running handlers: they
// finish and are settled. Ack and Nack failures are logged (Options.Logger); the message is
// then redelivered after its lease. Use Consume or Next (or C), not both at once.
func (s *Consumer) Consume(ctx context.Context, handler Handler, concurrency int) error {
	var wg sync.WaitGroup
	var once sync.Once
	var stopErr error
	for range max(concurrency, 1) {
		wg.Go(func() {
			for ctx.Err() == nil {
				d, err := s.Next(ctx)
				if err != nil {
					once.Do(func() { stopErr = err })
					return
				}
				s.handle(ctx, handler, d)
			}
			once.Do(func() { stopErr = ctx.Err() })
		})
	}
	wg.Wait()
	return stopErr
}

// handle runs handler on d with a context that ends when d's lease is lost, then acks or nacks
// d by the handler's result unless the lease was lost.
func (s *Consumer) handle(ctx context.Context, handler Handler, d *Delivery) {
	base := context.WithoutCancel(ctx)
	hctx, cancel := context.WithCancel(d.TraceContext(base))
	done := make(chan struct{})
	go func() {
		select {
		case <-d.LeaseLost():
			cancel()
		case <-done:
		}
	}()
	herr := handler(hctx, d)
	close(done)
	cancel()
	select {
	case <-d.LeaseLost():
		s.c.log.Warn("fila: lease lost while handling", "queue", d.Queue, "id", d.ID.String())
		return
	default:
	}
	sctx, scancel := context.WithTimeout(base, handlerSettleTimeout)
	defer scancel()
	var err error
	if herr == nil {
		err = d.Ack(sctx)
	} else {
		err = d.Nack(sctx, herr.Error(), nil)
	}
	if err != nil {
		s.c.log.Warn("fila: settling a handled delivery failed", "queue", d.Queue, "id", d.ID.String(),
			"ack", herr == nil, "err", err)
	}
}
