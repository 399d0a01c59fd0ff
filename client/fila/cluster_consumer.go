package fila

import (
	"context"
	"errors"
	"sync"
)

// ClusterConsumer is a subscription of a Cluster that follows its queue's leader: it subscribes
// on the leader (following NotLeader), and when that subscription ends because the node died,
// was cut off or was deposed (NotLeader, NodeNotReady, AuthStateStale, a lost connection), it
// subscribes again on the new leader, for as long as it is open. A failover costs the messages
// leased on the old leader that were not settled: each is delivered again once its lease ends
// (with fast delivery durability, after the new leader's reclaim grace); Deliveries still held
// can be acked, nacked and extended through the new leader meanwhile. Any other end of a
// subscription (QueueNotFound, Forbidden, ...) stops it with that error.
//
// Each subscription is a Consumer of its own, with the ConsumeOptions given: MaxDeliveries,
// when set, bounds each subscription, not their sum. A sharded queue is consumed through one
// subscription per shard, served in turns weighted by the shards' backlogged fairness keys
// (cluster_shardfair.go), or, when the shards cannot be consumed one by one, one per node that
// leads a shard, merged (cluster_shards.go).
type ClusterConsumer struct {
	c     *Cluster
	queue string
	opts  ConsumeOptions
	out   chan *Delivery
	ctx   context.Context // ends with Close
	stop  context.CancelFunc
	done  chan struct{} // closed when run has returned

	mu     sync.Mutex
	cur    *Consumer
	addr   string // the node of cur
	moves  int
	err    error
	closed bool
}

// Consume subscribes to queue on its leader. It returns once a node answered ConsumeOk, or with
// the failure of the last attempt (a final answer such as QueueNotFound at once; NotLeader,
// NodeNotReady, AuthStateStale and unreachable nodes are retried within ctx and
// Options.FailoverTimeout).
func (c *Cluster) Consume(ctx context.Context, queue string, opts ConsumeOptions) (*ClusterConsumer, error) {
	s := &ClusterConsumer{c: c, queue: queue, opts: opts, out: make(chan *Delivery), done: make(chan struct{})}
	s.ctx, s.stop = context.WithCancel(c.life)
	if addrs, err := c.shardLeaders(ctx, queue); err == nil && addrs != nil { // a sharded queue: cluster_shards.go
		err := s.consumeFair(ctx) // cluster_shardfair.go
		if errors.Is(err, errFairRefused) {
			err = s.consumeShards(ctx, addrs)
		}
		if err != nil {
			s.stop()
			return nil, err
		}
		return s, nil
	}
	inner, addr, err := c.subscribe(ctx, queue, opts, c.retrier())
	if err != nil {
		s.stop()
		return nil, err
	}
	s.cur, s.addr = inner, addr
	go s.run(inner, addr)
	return s, nil
}

// subscribe subscribes on queue's leader as known, following NotLeader and moving off nodes
// that do not answer, until one answers ConsumeOk or the retrier gives up.
func (c *Cluster) subscribe(ctx context.Context, queue string, opts ConsumeOptions, r *retrier) (*Consumer, string, error) {
	for {
		addr := c.target(queue)
		cl, err := c.node(ctx, addr)
		var inner *Consumer
		if err == nil {
			inner, err = cl.Consume(ctx, queue, opts)
		}
		if err == nil {
			c.learn(queue, addr)
			return inner, addr, nil
		}
		err = nodeError(addr, err)
		switch c.classify(err) {
		case retryFinal:
			return nil, "", err
		case retryRedirect:
			if leader, ok := LeaderAddr(err); ok && leader != addr {
				c.learn(queue, leader)
				if r.n++; r.n < 100 { // a redirect is progress; a loop of them is not
					continue
				}
			}
			c.forgetRoute(queue, addr)
		case retryWait:
			c.forgetRoute(queue, addr)
		case retryMove:
			c.nodeDown(addr)
		}
		if !r.pause(ctx, 0) {
			return nil, "", err
		}
	}
}

// run hands the deliveries of the current subscription to Next, and subscribes again when it
// ends for a reason a failover explains.
func (s *ClusterConsumer) run(inner *Consumer, addr string) {
	defer close(s.done)
	defer close(s.out)
	for {
		for {
			d, err := inner.Next(s.ctx)
			if err != nil {
				break
			}
			select {
			case s.out <- d:
			case <-s.ctx.Done():
			}
		}
		if s.ctx.Err() != nil {
			inner.Close()
			s.finish(s.closedErr())
			return
		}
		why := inner.Err()
		switch s.c.classify(why) {
		case retryFinal:
			s.finish(why)
			return
		case retryRedirect:
			leader, _ := LeaderAddr(why)
			s.c.learn(s.queue, leader)
		case retryWait:
			s.c.forgetRoute(s.queue, addr)
		case retryMove:
			s.c.nodeDown(addr)
		}
		inner.Close()
		s.c.log.Info("fila: subscription ended, subscribing on the queue's leader again", "queue", s.queue, "node", addr, "why", why)
		for {
			next, naddr, err := s.c.subscribe(s.ctx, s.queue, s.opts, s.c.retrier())
			if err == nil {
				inner, addr = next, naddr
				break
			}
			if s.ctx.Err() != nil {
				s.finish(s.closedErr())
				return
			}
			if s.c.classify(err) == retryFinal {
				s.finish(err)
				return
			}
			s.c.log.Warn("fila: no leader took the subscription yet", "queue", s.queue, "err", err)
		}
		s.mu.Lock()
		s.cur, s.addr = inner, addr
		s.moves++
		s.mu.Unlock()
	}
}

// closedErr is why the subscription stops when its context ended: Close, or the Cluster's.
func (s *ClusterConsumer) closedErr() error {
	if s.c.life.Err() != nil {
		return ErrClosed
	}
	return ErrConsumerClosed
}

func (s *ClusterConsumer) finish(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// Next returns the next delivery, waiting until one arrives, ctx ends, or the subscription
// stops (then its error). A delivery is never lost to a cancelled Next.
func (s *ClusterConsumer) Next(ctx context.Context) (*Delivery, error) {
	select {
	case d, ok := <-s.out:
		if !ok {
			return nil, s.Err()
		}
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// C returns the channel of deliveries; it is closed when the subscription stops (Err tells why).
func (s *ClusterConsumer) C() <-chan *Delivery { return s.out }

// Err is why the subscription stopped (ErrConsumerClosed after Close), or nil while it runs.
func (s *ClusterConsumer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Queue is the subscribed queue.
func (s *ClusterConsumer) Queue() string { return s.queue }

// Node is the address of the node the subscription is on now (of a sharded queue: the nodes
// subscribed to, comma-separated).
func (s *ClusterConsumer) Node() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Moves counts the subscriptions made again on another leader (or on the same node after it came
// back) since Consume.
func (s *ClusterConsumer) Moves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moves
}

// Close cancels the subscription and waits for its goroutine. Deliveries not yet returned by
// Next are dropped (their leases end on the server); those already returned can still be acked.
func (s *ClusterConsumer) Close() error {
	s.stop()
	<-s.done
	return nil
}
