package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

// TestReconnectAcrossKill kills a private broker with SIGKILL in the middle of a produce and
// consume run and starts it again on the same data directory and address. One reconnecting
// client goes on by itself: a call made during the outage fails with a *ReconnectError only once
// its context ended (seeds are tried in turn meanwhile), the producer resends what was not
// answered (idempotency keys make that safe), the consumer resubscribes, and every message the
// producer reported as sent is delivered.
func TestReconnectAcrossKill(t *testing.T) {
	t.Parallel()
	testReconnectAcross(t, func(s *server) {
		s.proc.Kill()
	}, false)
}

// TestReconnectAcrossGracefulRestart is the same run with SIGTERM (the server sends Disconnect)
// and a handler-style consumer (Consumer.Consume).
func TestReconnectAcrossGracefulRestart(t *testing.T) {
	t.Parallel()
	testReconnectAcross(t, func(s *server) {
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	}, true)
}

// testReconnectAcross runs a producer and a consumer on one reconnecting client while stop ends
// the broker, which then starts again on the same data directory and address.
func testReconnectAcross(t *testing.T, stop func(*server), handler bool) {
	s := privateServer(t)
	ctx := testCtx(t)
	var evMu sync.Mutex
	var events []fila.ConnectionEventKind
	dead, err := closedAddr() // a second seed where nothing listens: tried in turn, never connected
	if err != nil {
		t.Fatal(err)
	}
	c, err := fila.DialSeeds(ctx, []string{s.addr, dead}, &fila.Options{
		MaxReconnects: -1, ReconnectWait: 20 * time.Millisecond, MaxReconnectWait: 200 * time.Millisecond,
		ConnectionHandler: func(e fila.ConnectionEvent) { evMu.Lock(); events = append(events, e.Kind); evMu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	queue := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 2 * time.Second, MaxAttempts: 1000, Backoff: fibp.BackoffNone})

	run := newReconnectRun(t, c, queue)
	const total, before = 600, 200
	go run.produce(ctx, total)
	if handler {
		go run.cons.Consume(ctx, run.handle, 4)
	} else {
		go run.consume(ctx)
	}

	eventually(t, "the first messages sent", func() bool { return run.sentCount() >= before })
	stop(s)
	eventually(t, "the client noticed the stop", func() bool { return !c.Connected() })

	callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = c.GetStats(callCtx, queue)
	ended := callCtx.Err() != nil
	cancel()
	var re *fila.ReconnectError
	if !ended || !errors.Is(err, fila.ErrDisconnected) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) {
		t.Errorf("GetStats during the outage = %v (context ended: %v), want a *ReconnectError after the deadline", err, ended)
	}

	if n := run.sentCount(); n >= total {
		t.Errorf("all %d messages were sent before the restart; the run should span it", n)
	}
	if err := s.startAgain(); err != nil {
		t.Fatal(err)
	}

	eventually(t, "every message sent", func() bool { return run.sentCount() == total })
	run.mu.Lock()
	sendErrs := run.sendErrs
	run.mu.Unlock()
	if sendErrs != nil {
		t.Fatalf("sends failed: %v", sendErrs)
	}
	eventually(t, "every message sent delivered", func() bool { return len(run.missing()) == 0 })
	run.checkDelivered()
	if c.Err() != nil || run.cons.Err() != nil {
		t.Errorf("after the restart the client stopped with %v, the consumer with %v", c.Err(), run.cons.Err())
	}
	evMu.Lock()
	defer evMu.Unlock()
	if len(events) < 2 || events[0] != fila.Disconnected || events[len(events)-1] != fila.Reconnected {
		t.Errorf("connection events %v, want Disconnected ... Reconnected", events)
	}
}

// reconnectRun is the producer and consumer side of testReconnectAcross.
type reconnectRun struct {
	t     *testing.T
	queue string
	prod  *fila.Producer
	cons  *fila.Consumer

	mu       sync.Mutex
	sent     map[fila.MessageID]bool // answered Ok
	seen     map[fila.MessageID]bool // delivered
	sendErrs error
}

func newReconnectRun(t *testing.T, c *fila.Client, queue string) *reconnectRun {
	r := &reconnectRun{t: t, queue: queue, sent: map[fila.MessageID]bool{}, seen: map[fila.MessageID]bool{}}
	r.prod = c.NewProducer(fila.ProducerOptions{MaxBatch: 8})
	t.Cleanup(func() { r.prod.Close() })
	r.cons = consume(t, c, queue, fila.ConsumeOptions{MaxUnacked: 16})
	return r
}

// produce sends n messages from a few goroutines, each with an idempotency key.
func (r *reconnectRun) produce(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				m := fila.Message{Queue: r.queue, Payload: fmt.Appendf(nil, "m-%d", i), IdempotencyKey: fmt.Sprint("key-", i)}
				id, err := r.prod.Send(ctx, m)
				r.mu.Lock()
				if err != nil {
					r.sendErrs = errors.Join(r.sendErrs, fmt.Errorf("message %d: %w", i, err))
				} else {
					r.sent[id] = true
				}
				r.mu.Unlock()
				time.Sleep(time.Millisecond) // spread the run over the restart
			}
		})
	}
	wg.Wait()
}

// consume takes deliveries until ctx ends, acking each; acks that fail (the connection dropped)
// leave the message to be redelivered.
func (r *reconnectRun) consume(ctx context.Context) {
	for {
		d, err := r.cons.Next(ctx)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.seen[d.ID] = true
		r.mu.Unlock()
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d.Ack(actx)
		cancel()
	}
}

// handle records a delivery; Consumer.Consume acks it.
func (r *reconnectRun) handle(_ context.Context, d *fila.Delivery) error {
	r.mu.Lock()
	r.seen[d.ID] = true
	r.mu.Unlock()
	return nil
}

func (r *reconnectRun) sentCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.sent)
	if r.sendErrs != nil {
		n = -1 // do not wait for sends that failed
	}
	return n
}

// missing lists IDs answered Ok that were not delivered yet.
func (r *reconnectRun) missing() []fila.MessageID {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []fila.MessageID
	for id := range r.sent {
		if !r.seen[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// checkDelivered reports deliveries of messages never answered Ok: resent frames must have been
// recognised as duplicates by their idempotency keys.
func (r *reconnectRun) checkDelivered() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.seen {
		if !r.sent[id] {
			r.t.Errorf("delivered %v, which no send reported", id)
		}
	}
}
