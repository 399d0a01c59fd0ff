package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

// Workload is the clients of a run: producers enqueueing unique values and consumers acking
// every delivery, all through the Go SDK with reconnection on, against every address given.
// With several queues a producer sends each batch to the next queue in turn, and consumer i
// takes queue i modulo their number (so there should be as many consumers as queues at least).
type Workload struct {
	Addrs     []string      // fila-server FIBP addresses (the SDK's seeds)
	Queue     string        // the queue's name, or the prefix of Queue-0 … Queue-(Queues-1)
	Queues    int           // default 1: the queue Queue itself
	Producers int           // default 2
	Consumers int           // default 2
	Batch     int           // messages per Enqueue frame (default 1)
	OpTimeout time.Duration // bound of each call (default 5s); a call past it is Unknown
	Rate      int           // messages enqueued per second by all producers together (0: as fast as answered)
}

// The clients both workloads run unless told otherwise.
const (
	defaultProducers = 2
	defaultConsumers = 2
	defaultOpTimeout = 5 * time.Second
)

// clientDefaults fills in the client counts and call bound both workloads share.
func clientDefaults(producers, consumers *int, opTimeout *time.Duration) {
	if *producers == 0 {
		*producers = defaultProducers
	}
	if *consumers == 0 {
		*consumers = defaultConsumers
	}
	if *opTimeout == 0 {
		*opTimeout = defaultOpTimeout
	}
}

func (w Workload) withDefaults() Workload {
	clientDefaults(&w.Producers, &w.Consumers, &w.OpTimeout)
	if w.Batch == 0 {
		w.Batch = 1
	}
	if w.Queues == 0 {
		w.Queues = 1
	}
	return w
}

// clientOptions reconnect for ever with a short backoff, so that a client comes back soon
// after a node does, and send keep-alive Pings, so that a client of a paused node (SIGSTOP)
// learns within PongTimeout that it has no answer to wait for: its calls fail, and the
// workload tries another node (without them it waited out the pause, its calls' timeout).
func clientOptions() *fila.Options {
	return &fila.Options{DialRetry: true, MaxReconnects: -1, ReconnectWait: 20 * time.Millisecond,
		MaxReconnectWait: 250 * time.Millisecond, DialTimeout: 2 * time.Second,
		PingInterval: 250 * time.Millisecond, PongTimeout: time.Second}
}

// QueueNames are the workload's queues.
func (w Workload) QueueNames() []string {
	w = w.withDefaults()
	if w.Queues == 1 {
		return []string{w.Queue}
	}
	names := make([]string, w.Queues)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", w.Queue, i)
	}
	return names
}

// CreateQueues creates the workload's queues: committed ones (delivery durability committed),
// leases of visibility, no dead-lettering in practice (a message may be redelivered after every
// fault).
func (w Workload) CreateQueues(ctx context.Context, visibility time.Duration) error {
	c, err := fila.DialSeeds(ctx, w.Addrs, clientOptions())
	if err != nil {
		return err
	}
	defer c.Close()
	for _, q := range w.QueueNames() {
		for {
			_, err = c.CreateQueue(ctx, fila.QueueConfig{Name: q, VisibilityTimeout: visibility,
				MaxAttempts: 1 << 20, DeliveryDurability: fila.DeliveryDurabilityCommitted})
			if err == nil || errors.Is(err, fila.ErrQueueAlreadyExists) {
				break
			}
			// A cluster that has just formed may take longer than PongTimeout to answer the
			// first admin request (its meta group's first proposal), and the server answers no
			// Ping while an admin request waits: the client drops the connection, reconnects and
			// asks again (an earlier attempt may have created the queue).
			if !errors.Is(err, fila.ErrConnectionLost) && !errors.Is(err, fila.ErrDisconnected) || ctx.Err() != nil {
				return fmt.Errorf("queue %s: %w", q, err)
			}
		}
	}
	return nil
}

// Run drives the workload until ctx ends, recording every operation in rec. Producers are
// clients 0..Producers-1, consumers the next ones.
func (w Workload) Run(ctx context.Context, rec *Recorder) error {
	w = w.withDefaults()
	return runClients(w.Producers, w.Consumers, func(i int) error { return w.produce(ctx, i, rec) },
		func(i int) error { return w.consume(ctx, i, rec) })
}

// runClients runs producers clients 0..producers-1 and consumers the next ones, each on its own
// goroutine, until all have returned, and joins their errors.
func runClients(producers, consumers int, produce, consume func(client int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)
	for i := range producers {
		wg.Go(func() { errs <- produce(i) })
	}
	for i := range consumers {
		wg.Go(func() { errs <- consume(producers + i) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// outcome classifies an SDK error: an answer of the broker is a definite failure, but for
// NodeNotReady and StorageError; anything else (a lost connection, a timeout, a reconnection
// still going on) may or may not have taken effect. A leader deposed while an enqueue's or an
// ack's entry was in its log answers it by the entry's fate (server/broker/fate.go): Ok when the
// next leader committed it, NotLeader when it was dropped, StorageError when it could not learn
// which; so NotLeader is a definite failure (the checker finds the message stored anyway, a
// phantom, if a node answers it wrongly). NodeNotReady may come from a node that forwarded the
// request and lost the link (server/broker/forward.go): the leader may have carried it out.
func outcome(err error) (Outcome, string) {
	if err == nil {
		return Ok, ""
	}
	var fe *fila.Error
	if errors.As(err, &fe) && fe.Code != fibp.CodeNodeNotReady && fe.Code != fibp.CodeStorageError {
		return Fail, err.Error()
	}
	return Unknown, err.Error()
}

// produce runs one lane of the producer per queue, each enqueueing into its queue alone: a
// producer that sent its batches to the queues in turn waited on a queue whose leader was
// paused (SIGSTOP) for the whole pause, and every producer with it, so that no queue took an
// enqueue while two of the three were served.
func (w Workload) produce(ctx context.Context, client int, rec *Recorder) error {
	queues := w.QueueNames()
	var wg sync.WaitGroup
	errs := make([]error, len(queues))
	for lane, queue := range queues {
		wg.Go(func() { errs[lane] = w.produceTo(ctx, client, lane, queue, rec) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// produceTo enqueues batches into queue, values "p<client>.<lane>-<n>".
func (w Workload) produceTo(ctx context.Context, client, lane int, queue string, rec *Recorder) error {
	r := newRouter(w, rec, client)
	defer r.close()
	// A batch is due every interval; one that failed is not made up for later: without that, the
	// attempts refused quickly during a failover ran ahead of the schedule, and the producers
	// then paused, enqueueing nothing, until it caught up (seconds the workload counted as the
	// cluster's unavailability). A producer held up for longer than a second does not burst to
	// catch up either.
	interval := time.Duration(0)
	if w.Rate > 0 {
		lanes := w.Producers * w.Queues
		interval = time.Duration(float64(w.Batch) * float64(lanes) / float64(w.Rate) * float64(time.Second))
	}
	due := time.Now()
	for n := 0; ctx.Err() == nil; {
		if interval > 0 {
			pause(ctx, time.Until(due))
			due = due.Add(interval)
			if now := time.Now(); now.Sub(due) > time.Second {
				due = now
			}
		}
		c, err := r.client(ctx, queue)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.learn(ctx, nil, queue, err) // the node is down or does not answer: try another
			continue
		}
		msgs := make([]fila.Message, w.Batch)
		ops := make([]Op, w.Batch)
		start, node := rec.Now(), c.NodeID()
		for i := range msgs {
			n++
			v := fmt.Sprintf("p%d.%d-%d", client, lane, n)
			msgs[i] = fila.Message{Queue: queue, Payload: []byte(v)}
			ops[i] = Op{Client: client, Kind: Enqueue, Value: v, Invoke: start, Queue: queue, Node: node}
		}
		octx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
		res, err := c.Enqueue(octx, msgs...)
		cancel()
		end := rec.Now()
		for i := range ops {
			ops[i].Complete = end
			ierr := err
			if err == nil {
				ierr = res[i].Err
				if res[i].Err == nil {
					ops[i].ID = res[i].ID.String()
				}
			}
			ops[i].Outcome, ops[i].Err = outcome(ierr)
			ops[i].Leader, _ = fila.LeaderAddr(ierr)
			rec.Add(ops[i])
		}
		switch {
		case err == nil && res[0].Err != nil && misrouted(res[0].Err):
			r.learn(ctx, c, queue, res[0].Err)
		case err != nil && !errors.Is(err, context.Canceled):
			r.learn(ctx, c, queue, err) // no answer: the node may be down, try another
		case err != nil || res[0].Err != nil:
			pause(ctx, 10*time.Millisecond) // a node is not ready: do not spin
		}
	}
	return nil
}

func (w Workload) consume(ctx context.Context, client int, rec *Recorder) error {
	r := newRouter(w, rec, client)
	defer r.close()
	var acks sync.WaitGroup
	defer acks.Wait() // before the clients close
	queues := w.QueueNames()
	queue := queues[(client-w.Producers)%len(queues)]
	for ctx.Err() == nil {
		c, err := r.client(ctx, queue)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.learn(ctx, nil, queue, err) // the node is down or does not answer: try another
			continue
		}
		sub := Op{Client: client, Kind: Subscribe, Queue: queue, Node: c.NodeID(), Invoke: rec.Now()}
		octx, cancel := context.WithTimeout(ctx, w.OpTimeout)
		cons, err := c.Consume(octx, queue, fila.ConsumeOptions{MaxUnacked: 64})
		cancel()
		if err != nil {
			rec.Add(subscribeEnded(rec, sub, err))
			r.learn(ctx, c, queue, err)
			continue
		}
		for {
			d, err := next(ctx, c, cons)
			if err != nil {
				if ctx.Err() == nil { // the subscription ended: the queue may be led elsewhere now
					rec.Add(subscribeEnded(rec, sub, err))
					r.learn(ctx, c, queue, err)
				}
				break // ctx ended, or the subscription did: subscribe again
			}
			op := delivery(rec, d, client, false)
			op.Queue, op.Node = queue, sub.Node
			rec.Add(op)
			acks.Go(func() { ack(d, client, rec, w.OpTimeout, false) })
		}
		cons.Close()
	}
	return nil
}

// next is cons's next delivery. A subscription waits for its client's next connection when the
// connection drops; next ends it when the client is not connected (its node is down or paused),
// so that the consumer tries another node.
func next(ctx context.Context, c *fila.Client, cons *fila.Consumer) (*fila.Delivery, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		d, err := cons.Next(wait)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return d, err
		}
		if !c.Connected() {
			return nil, errNotConnected
		}
	}
}

// subscribeEnded completes sub, a subscription that failed or ended with err.
func subscribeEnded(rec *Recorder, sub Op, err error) Op {
	sub.Complete = rec.Now()
	sub.Outcome, sub.Err = outcome(err)
	sub.Leader, _ = fila.LeaderAddr(err)
	return sub
}

// delivery records d as taken now and leased when the broker says it leased it (a delivery
// waits in the SDK until Next takes it: an ack answered meanwhile is not answered before it).
func delivery(rec *Recorder, d *fila.Delivery, client int, final bool) Op {
	taken := rec.Now()
	leased := taken
	if !d.LeasedAt.IsZero() {
		leased = min(rec.At(d.LeasedAt), taken)
	}
	return Op{Client: client, Kind: Deliver, Value: string(d.Payload), ID: d.ID.String(), Outcome: Ok, Invoke: leased, Complete: taken, Final: final}
}

// ack acks d and records it. Acks run to their own timeout even when the run ends, so that
// each is answered or known unanswered.
func ack(d *fila.Delivery, client int, rec *Recorder, timeout time.Duration, final bool) {
	op := Op{Client: client, Kind: Ack, Value: string(d.Payload), ID: d.ID.String(), Invoke: rec.Now(), Final: final}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := d.Ack(ctx)
	cancel()
	op.Complete = rec.Now()
	op.Outcome, op.Err = outcome(err)
	rec.Add(op)
}

// Drain consumes and acks every message still stored in each queue, each delivery recorded with
// Final set, until the queue reports none stored, in flight or delayed, or until nothing was
// delivered for quiet (longer than the queue's lease, so that leases lost with the workload's
// consumers have run out) while it still counts some. It records Drained: Ok for an empty queue,
// Fail for a queue that counts messages it does not deliver, Unknown when ctx ended first (then
// the error says why).
func (w Workload) Drain(ctx context.Context, rec *Recorder, quiet time.Duration) error {
	const client = 1000
	start := rec.Now()
	var left uint64
	var err error
	for _, q := range w.QueueNames() {
		var n uint64
		if n, err = w.drain(ctx, q, client, rec, quiet); err != nil {
			err = fmt.Errorf("queue %s: %w", q, err)
			break
		}
		left += n
	}
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

func (w Workload) drain(ctx context.Context, queue string, client int, rec *Recorder, quiet time.Duration) (uint64, error) {
	w = w.withDefaults()
	r := newRouter(w, nil, client)
	defer r.close()
	var acks sync.WaitGroup
	defer acks.Wait() // before the clients close
	last := time.Now()
	for {
		c, err := r.client(ctx, queue)
		if err != nil {
			if ctx.Err() != nil {
				return 0, err
			}
			r.learn(ctx, nil, queue, err)
			continue
		}
		cons, err := c.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: 256})
		if err != nil {
			if ctx.Err() != nil || !misrouted(err) {
				return 0, err
			}
			r.learn(ctx, c, queue, err)
			continue
		}
		left, done, err := w.drainFrom(ctx, c, cons, queue, client, rec, quiet, &last, &acks)
		cons.Close()
		if done || err != nil && !misrouted(err) {
			return left, err
		}
		r.learn(ctx, c, queue, err) // the subscription moved: follow it
	}
}

// drainFrom takes deliveries from cons until the queue is empty (done), nothing came for quiet
// (done, with what is left), or the subscription ends (its error).
func (w Workload) drainFrom(ctx context.Context, c *fila.Client, cons *fila.Consumer, queue string, client int, rec *Recorder,
	quiet time.Duration, last *time.Time, acks *sync.WaitGroup) (uint64, bool, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		d, err := cons.Next(wait)
		cancel()
		if err == nil {
			*last = time.Now()
			rec.Add(delivery(rec, d, client, true))
			acks.Go(func() { ack(d, client, rec, w.OpTimeout, true) })
			continue
		}
		if ctx.Err() != nil {
			return 0, false, fmt.Errorf("the queue was not drained: %w", ctx.Err())
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return 0, false, err
		}
		acks.Wait() // an unacked delivery still counts as in flight
		st, err := c.GetStats(ctx, queue)
		if err != nil {
			continue
		}
		left := st.Depth + st.InFlight + st.Delayed
		if left == 0 || time.Since(*last) > quiet {
			return left, true, nil
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
