package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Load is what a run drives: a Workload, or a ShardedWorkload.
type Load interface {
	// CreateQueues creates the queues with leases of visibility.
	CreateQueues(ctx context.Context, visibility time.Duration) error
	// Run drives the clients until ctx ends, recording every operation in rec.
	Run(ctx context.Context, rec *Recorder) error
	// Drain takes every message still stored (recorded with Final set) and records Drained;
	// quiet is how long it waits for a message the queue still counts.
	Drain(ctx context.Context, rec *Recorder, quiet time.Duration) error
}

// ShardedWorkload is the clients of a run on one sharded queue, ordered by group and
// deduplicated by idempotency key, all through the SDK's Cluster, which routes each message to
// its shard's leader and consumes every shard through one ClusterConsumer. Each producer sends
// batches of one message per ordering group of its own ("p<client>.g<k>", the header g), each
// message's idempotency key its value, one batch at a time (so that a group's messages are
// enqueued in sequence); every RepeatEvery-th batch is sent again at once, and the broker must
// answer the repeats with the first IDs. Consumers ack every delivery.
//
// The Cluster sends a request again when its connection broke before the answer, so an error
// says nothing of an earlier attempt: every enqueue and ack not answered Ok is recorded Unknown.
type ShardedWorkload struct {
	Addrs       []string      // fila-server FIBP addresses (the SDK's seeds)
	HTTPAddrs   []string      // their admin HTTP API (--http-listen), where the queue is created
	Queue       string        // default "orders"
	Shards      int           // default 4
	Groups      int           // ordering groups per producer (default 8): a batch's size
	Producers   int           // default 2
	Consumers   int           // ClusterConsumers (default 2)
	RepeatEvery int           // every RepeatEvery-th batch is sent twice (default 2; 1: all of them)
	OpTimeout   time.Duration // bound of each call (default 5s); a call past it is Unknown
	Rate        int           // new messages enqueued per second by all producers together (0: as fast as answered)
}

func (w ShardedWorkload) withDefaults() ShardedWorkload {
	if w.Queue == "" {
		w.Queue = "orders"
	}
	if w.Shards == 0 {
		w.Shards = 4
	}
	if w.Groups == 0 {
		w.Groups = 8
	}
	clientDefaults(&w.Producers, &w.Consumers, &w.OpTimeout)
	if w.RepeatEvery == 0 {
		w.RepeatEvery = 2
	}
	return w
}

// CreateQueues creates the sharded queue through the first admin HTTP API that answers: grouped
// by the header g, committed leases of visibility, no dead-lettering in practice.
func (w ShardedWorkload) CreateQueues(ctx context.Context, visibility time.Duration) error {
	w = w.withDefaults()
	if len(w.HTTPAddrs) == 0 {
		return errors.New("chaos: a sharded queue is created through the admin HTTP API: no HTTPAddrs")
	}
	body, _ := json.Marshal(map[string]any{"name": w.Queue, "shards": w.Shards, "ordering": "grouped",
		"ordering_key": "header:g", "visibility_timeout_ms": visibility.Milliseconds(), "max_attempts": 1 << 20})
	var errs []error
	for ctx.Err() == nil {
		for _, a := range w.HTTPAddrs {
			err := postQueue(ctx, a, body)
			if err == nil {
				return nil
			}
			if errors.Is(err, errRefused) {
				return fmt.Errorf("creating %s: %w", w.Queue, err)
			}
			errs = append(errs[len(errs)-min(len(errs), 2):], err)
		}
		pause(ctx, 200*time.Millisecond) // a cluster just formed: its meta group may have no leader yet
	}
	return fmt.Errorf("creating %s: %w", w.Queue, errors.Join(append(errs, ctx.Err())...))
}

// errRefused marks an answer 400 (a bad setting): asking again will not help.
var errRefused = errors.New("refused")

// postQueue posts a queue's creation to the admin HTTP API at addr; an existing queue is fine
// (an earlier attempt may have created it).
func postQueue(ctx context.Context, addr string, body []byte) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+addr+"/api/v1/queues", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	switch res.StatusCode {
	case http.StatusOK, http.StatusConflict:
		return nil
	case http.StatusBadRequest:
		return fmt.Errorf("POST %s/api/v1/queues: %w: %s", addr, errRefused, answer)
	}
	return fmt.Errorf("POST %s/api/v1/queues: %s: %s", addr, res.Status, answer)
}

// Run drives the workload until ctx ends. Producers are clients 0..Producers-1, consumers the
// next ones.
func (w ShardedWorkload) Run(ctx context.Context, rec *Recorder) error {
	w = w.withDefaults()
	return runClients(w.Producers, w.Consumers, func(i int) error { return w.produce(ctx, i, rec) },
		func(i int) error { return w.consume(ctx, i, rec) })
}

// dial connects a Cluster to the workload's nodes; the run's nodes may be down: it tries
// until ctx ends.
func (w ShardedWorkload) dial(ctx context.Context) (*fila.Cluster, error) {
	for {
		dctx, cancel := context.WithTimeout(ctx, w.OpTimeout)
		c, err := fila.DialCluster(dctx, w.Addrs, clientOptions())
		cancel()
		if err == nil || ctx.Err() != nil {
			return c, err
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// produce enqueues batches, one message per group, values "p<client>.g<k>-<n>".
func (w ShardedWorkload) produce(ctx context.Context, client int, rec *Recorder) error {
	c, err := w.dial(ctx)
	if err != nil {
		return nil // the run ended before a node answered
	}
	defer c.Close()
	interval := time.Duration(0)
	if w.Rate > 0 {
		interval = time.Duration(float64(w.Groups*w.Producers) / float64(w.Rate) * float64(time.Second))
	}
	due := time.Now()
	for n := 1; ctx.Err() == nil; n++ {
		if interval > 0 {
			pause(ctx, time.Until(due))
			due = due.Add(interval)
			if now := time.Now(); now.Sub(due) > time.Second {
				due = now // a producer held up does not burst to catch up
			}
		}
		msgs := make([]fila.Message, w.Groups)
		ops := make([]Op, w.Groups)
		for k := range msgs {
			g := fmt.Sprintf("p%d.g%d", client, k)
			v := fmt.Sprintf("%s-%d", g, n)
			msgs[k] = fila.Message{Queue: w.Queue, Headers: map[string]string{"g": g}, Payload: []byte(v), IdempotencyKey: v}
			ops[k] = Op{Client: client, Kind: Enqueue, Value: v, Queue: w.Queue, Group: g, Seq: n, Key: v}
		}
		w.enqueue(c, msgs, ops, rec)
		if n%w.RepeatEvery == 0 && ctx.Err() == nil {
			w.enqueue(c, msgs, ops, rec)
		}
	}
	return nil
}

// enqueue sends msgs and records ops with their answers. Whatever is not answered Ok is
// Unknown (the Cluster may have sent it twice).
func (w ShardedWorkload) enqueue(c *fila.Cluster, msgs []fila.Message, ops []Op, rec *Recorder) {
	start := rec.Now()
	octx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	res, err := c.Enqueue(octx, msgs...)
	cancel()
	end := rec.Now()
	for i, op := range ops {
		op.Invoke, op.Complete = start, end
		ierr := err
		if err == nil {
			if ierr = res[i].Err; ierr == nil {
				op.ID = res[i].ID.String()
			}
		}
		op.Outcome, op.Err = Ok, ""
		if ierr != nil {
			op.Outcome, op.Err = Unknown, ierr.Error()
		}
		rec.Add(op)
	}
	if err != nil {
		pause(context.Background(), 10*time.Millisecond) // no node answered: do not spin
	}
}

// consume takes the queue's deliveries through one ClusterConsumer, acking each, and
// subscribes again if the subscription ends.
func (w ShardedWorkload) consume(ctx context.Context, client int, rec *Recorder) error {
	c, err := w.dial(ctx)
	if err != nil {
		return nil
	}
	defer c.Close()
	var acks sync.WaitGroup
	defer acks.Wait() // before the Cluster closes
	for ctx.Err() == nil {
		sub := Op{Client: client, Kind: Subscribe, Queue: w.Queue, Invoke: rec.Now()}
		cons, err := c.Consume(ctx, w.Queue, fila.ConsumeOptions{MaxUnacked: 64})
		if err != nil {
			if ctx.Err() == nil {
				rec.Add(subscribeEnded(rec, sub, err))
				pause(ctx, 100*time.Millisecond)
			}
			continue
		}
		for {
			d, err := nextOf(ctx, cons)
			if err != nil {
				if ctx.Err() == nil {
					rec.Add(subscribeEnded(rec, sub, err))
				}
				break
			}
			op := delivery(rec, d, client, false)
			op.Queue = w.Queue
			rec.Add(op)
			acks.Go(func() { settle(d, client, rec, w.OpTimeout, false) })
		}
		cons.Close()
	}
	return nil
}

// errStoppedOpen is a ClusterConsumer that stopped (its Err set) without closing its channel.
var errStoppedOpen = errors.New("chaos: the ClusterConsumer stopped without closing its deliveries")

// nextOf is cons's next delivery. It looks at cons.Err every 250 ms while it waits: a
// ClusterConsumer that gave up may not close its channel (docs/chaos.md, "What the sharded runs
// found"), and the consumer then subscribes again instead of waiting for ever.
func nextOf(ctx context.Context, cons *fila.ClusterConsumer) (*fila.Delivery, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		d, err := cons.Next(wait)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return d, err
		}
		if why := cons.Err(); why != nil {
			return nil, fmt.Errorf("%w: %w", errStoppedOpen, why)
		}
	}
}

// settle acks d and records it; an ack not answered Ok is Unknown (the Cluster may have sent
// it twice: a second attempt answers MessageNotFound when the first was applied).
func settle(d *fila.Delivery, client int, rec *Recorder, timeout time.Duration, final bool) {
	op := Op{Client: client, Kind: Ack, Value: string(d.Payload), ID: d.ID.String(), Invoke: rec.Now(), Final: final}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := d.Ack(ctx)
	cancel()
	op.Complete, op.Outcome = rec.Now(), Ok
	if err != nil {
		op.Outcome, op.Err = Unknown, err.Error()
	}
	rec.Add(op)
}

// Drain consumes and acks every message still stored in the queue (every shard), each delivery
// recorded with Final set, until GetStats (the whole queue's) counts none stored, in flight or
// delayed, or nothing was delivered for quiet while it still counts some; then it records
// Drained as Workload.Drain does.
func (w ShardedWorkload) Drain(ctx context.Context, rec *Recorder, quiet time.Duration) error {
	w = w.withDefaults()
	const client = 1000
	start := rec.Now()
	left, err := w.drain(ctx, client, rec, quiet)
	op := Op{Client: client, Kind: Drained, Outcome: Ok, Invoke: start, Complete: rec.Now()}
	switch {
	case err != nil:
		op.Outcome, op.Err = Unknown, err.Error()
	case left > 0:
		op.Outcome, op.Err = Fail, fmt.Sprintf("the queue counts %d messages and delivered none of them for %v", left, quiet)
	}
	rec.Add(op)
	return err
}

func (w ShardedWorkload) drain(ctx context.Context, client int, rec *Recorder, quiet time.Duration) (uint64, error) {
	c, err := w.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var acks sync.WaitGroup
	defer acks.Wait()
	cons, err := c.Consume(ctx, w.Queue, fila.ConsumeOptions{MaxUnacked: 256})
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	last := time.Now()
	for {
		wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		d, err := cons.Next(wait)
		cancel()
		if err == nil {
			last = time.Now()
			rec.Add(delivery(rec, d, client, true))
			acks.Go(func() { settle(d, client, rec, w.OpTimeout, true) })
			continue
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("the queue was not drained: %w", ctx.Err())
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return 0, err
		}
		acks.Wait() // an unacked delivery still counts as in flight
		node, err := c.Any(ctx)
		if err != nil {
			continue
		}
		st, err := node.GetStats(ctx, w.Queue)
		if err != nil {
			continue
		}
		left := st.Depth + st.InFlight + st.Delayed
		if left == 0 || time.Since(last) > quiet {
			return left, nil
		}
	}
}
