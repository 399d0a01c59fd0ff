package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// pubsubWindow bounds the messages published but not yet received in the pub/sub workloads:
// neither NATS core nor Rift has flow control from subscriber to publisher, so the publisher
// waits rather than overrun the subscriber (which both brokers would cut off as a slow consumer;
// Rift's default limit is 8,192 queued messages per subscription).
const pubsubWindow = 4096

// pumpWindowed calls publish in a loop on its own goroutine, keeping at most pubsubWindow
// messages published but not yet received. stop ends it; failed receives its error, if any.
func pumpWindowed(received func() int64, publish func() error) (stop func(), failed <-chan error) {
	quit, errc := make(chan struct{}), make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var published int64
		var stalled time.Time
		for {
			select {
			case <-quit:
				return
			default:
			}
			if published-received() >= pubsubWindow {
				if stalled.IsZero() {
					stalled = time.Now()
				} else if time.Since(stalled) > 10*time.Second {
					errc <- errors.New("the subscriber stopped receiving (cut off as a slow consumer?)")
					return
				}
				time.Sleep(50 * time.Microsecond)
				continue
			}
			stalled = time.Time{}
			if err := publish(); err != nil {
				errc <- err
				return
			}
			published++
		}
	}()
	return func() { close(quit); <-done }, errc
}

// natsPubSub measures messages per second received by one subscriber from one publisher, over TLS.
func natsPubSub(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		sc, err := e.natsConnect(p)
		if err != nil {
			return nil, err
		}
		defer sc.Close()
		var received atomic.Int64
		sub, err := sc.Subscribe("pubsub", func(*nats.Msg) { received.Add(1) })
		if err != nil {
			return nil, err
		}
		sub.SetPendingLimits(-1, -1)
		if err := sc.Flush(); err != nil {
			return nil, err
		}
		pc, err := e.natsConnect(p)
		if err != nil {
			return nil, err
		}
		defer pc.Close()
		payload := make([]byte, size)
		stop, failed := pumpWindowed(received.Load, func() error { return pc.Publish("pubsub", payload) })
		defer stop()
		rate, err := e.measureRate(ctx, "nats pubsub", received.Load)
		select {
		case err = <-failed:
		default:
		}
		return []float64{rate}, err
	}
}

// natsReqReply times request/reply round trips of 1 KB, one at a time, over TLS.
func natsReqReply(ctx context.Context, e *env, p *peer) ([]float64, error) {
	rc, err := e.natsConnect(p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if _, err := rc.Subscribe("service", func(m *nats.Msg) { m.Respond(m.Data) }); err != nil {
		return nil, err
	}
	if err := rc.Flush(); err != nil {
		return nil, err
	}
	qc, err := e.natsConnect(p)
	if err != nil {
		return nil, err
	}
	defer qc.Close()
	payload := make([]byte, 1024)
	p50, p99, err := e.measureLatency(ctx, "nats request/reply", func() (time.Duration, error) {
		start := time.Now()
		if _, err := qc.Request("service", payload, 5*time.Second); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	})
	return []float64{p50, p99}, err
}
