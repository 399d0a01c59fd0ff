package powerfail

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

// drainTimeout bounds the check after a restart; leases from before the crash expire within
// the queue's visibility timeout.
const drainTimeout = 20 * time.Second

// check runs after a restart: it consumes and acks everything the queue stores (as many
// distinct messages as GetStats counts), checks each delivery against the ledger, verifies the
// queue is then empty, and settles the round. A queue that no longer exists is a violation, and
// is created again. It returns how many messages were stored.
func check(addr string, round int, l *ledger) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	c, err := fila.Dial(ctx, addr, nil)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	st, err := c.GetStats(ctx, queueName)
	if errors.Is(err, fila.ErrQueueNotFound) {
		l.mu.Lock()
		l.violate(violation{kind: "queue lost", round: round, detail: "CreateQueue was answered Ok"})
		l.mu.Unlock()
		l.settle(round, nil)
		return 0, createQueue(ctx, c)
	}
	if err != nil {
		return 0, err
	}
	stored := int(st.Depth + st.InFlight + st.Delayed)
	drained, err := drain(ctx, c, round, stored, l)
	if err != nil {
		return 0, err
	}
	if st, err = c.GetStats(ctx, queueName); err != nil {
		return 0, err
	}
	if left := st.Depth + st.InFlight + st.Delayed; left != 0 {
		l.mu.Lock()
		l.violate(violation{kind: "not drained", round: round, detail: fmt.Sprintf("%d messages left after acking all %d stored", left, stored)})
		l.mu.Unlock()
	}
	l.settle(round, drained)
	return stored, nil
}

// drain consumes until n distinct messages were delivered, acking each (and recording the acks
// in the ledger); it returns their IDs.
func drain(ctx context.Context, c *fila.Client, round, n int, l *ledger) (map[fila.MessageID]bool, error) {
	seen := map[fila.MessageID]bool{}
	if n == 0 {
		return seen, nil
	}
	cons, err := c.Consume(ctx, queueName, fila.ConsumeOptions{MaxUnacked: 512})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var acks sync.WaitGroup
	var mu sync.Mutex
	var ackErr error
	for len(seen) < n {
		d, err := cons.Next(ctx)
		if err != nil {
			return nil, fmt.Errorf("drain: %d of %d stored messages delivered: %w", len(seen), n, err)
		}
		l.delivered(round, d)
		seen[d.ID] = true
		acks.Go(func() {
			if err := d.Ack(ctx); err != nil {
				mu.Lock()
				ackErr = fmt.Errorf("drain: ack of %v: %w", d.ID, err)
				mu.Unlock()
				return
			}
			l.ackOk(round, d.ID)
		})
	}
	acks.Wait()
	return seen, ackErr
}

func createQueue(ctx context.Context, c *fila.Client) error {
	_, err := c.CreateQueue(ctx, fila.QueueConfig{
		Name:              queueName,
		VisibilityTimeout: visibilityTimeout,
		MaxAttempts:       1000, // never dead-letter: a message leaves the queue only by an ack
		Backoff:           fibp.BackoffNone,
	})
	return err
}
