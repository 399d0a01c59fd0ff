package fila

import (
	"context"
	"sync"

	"github.com/filamq/fila/generated/fibp"
)

// ClusterProducer batches messages from any number of goroutines per node: each message joins
// the batch of its queue's leader as last heard (a Producer of that node's connection, with the
// ProducerOptions given), and the route hints of the answers steer the next ones. A message
// answered NotLeader, NodeNotReady, ChannelFull or AuthStateStale, or lost with its node's
// connection, is sent again alone through Cluster.Enqueue, with its retries (its result may
// then come after later messages'). A resent message may be stored twice when its first frame
// was stored before the connection broke: give it an IdempotencyKey.
type ClusterProducer struct {
	c    *Cluster
	opts ProducerOptions

	mu       sync.Mutex
	prods    map[*Client]*Producer // by node connection
	closed   bool
	retrying int           // messages being sent again
	idle     chan struct{} // closed when retrying drops to 0; nil while it is 0
}

// NewProducer returns a batching producer over the cluster. Close it when done.
func (c *Cluster) NewProducer(opts ProducerOptions) *ClusterProducer {
	return &ClusterProducer{c: c, opts: opts, prods: map[*Client]*Producer{}}
}

// Send enqueues m as part of a batch and waits for its result.
func (p *ClusterProducer) Send(ctx context.Context, m Message) (MessageID, error) {
	m.Headers = inject(p.c.opts.Propagator, ctx, m.Headers)
	return p.SendAsync(m).Wait(ctx)
}

// SendAsync adds m to the batch of its queue's leader and returns at once (unless that node's
// connection must be dialled first, or too many of its batches are queued). m.Payload must not
// change until the Pending is done.
func (p *ClusterProducer) SendAsync(m Message) *Pending {
	key := p.c.routeKey(&m) // its queue, or its shard's group (cluster_shardroute.go)
	addr := p.c.target(key)
	cl, err := p.c.node(p.c.life, addr)
	if err != nil {
		if p.c.classify(err) == retryMove {
			p.c.nodeDown(addr)
		}
		pd := &Pending{done: make(chan struct{})}
		p.resend(pd, m, nodeError(addr, err))
		return pd
	}
	prod, err := p.producer(cl)
	pd := &Pending{c: cl, done: make(chan struct{})}
	if err != nil {
		pd.resolve(EnqueueResult{Err: err})
		return pd
	}
	out := &Pending{c: cl, done: make(chan struct{})}
	pd.then = func(r EnqueueResult) {
		switch p.c.classify(r.Err) {
		case retryFinal:
			if r.Err == nil {
				if _, ok := p.c.Route(key); !ok {
					p.c.learn(key, addr) // taken without a hint: this node leads the queue
				}
			}
			out.resolve(r)
		case retryRedirect:
			if a, ok := p.c.Route(key); !ok || a == addr {
				p.c.forgetRoute(key, addr)
			}
			p.resend(out, m, r.Err)
		case retryWait:
			p.c.forgetRoute(key, addr)
			p.resend(out, m, r.Err)
		case retryMove:
			p.c.nodeDown(addr)
			p.resend(out, m, r.Err)
		}
	}
	prod.send(m, pd)
	return out
}

// producer returns the Producer of node connection cl, making it when needed; those of
// connections that ended are closed and forgotten.
func (p *ClusterProducer) producer(cl *Client) (*Producer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrProducerClosed
	}
	if prod := p.prods[cl]; prod != nil {
		return prod, nil
	}
	for old, prod := range p.prods {
		if old.Err() != nil {
			delete(p.prods, old)
			go prod.Close() // its batches have failed, and are being sent again
		}
	}
	prod := cl.NewProducer(p.opts)
	prod.hints = func(hints []fibp.RouteHint) {
		for _, h := range hints {
			if h.LeaderAddr != "" {
				p.c.learn(h.Queue, h.LeaderAddr)
			}
		}
	}
	p.prods[cl] = prod
	return prod, nil
}

// resend sends m again through Cluster.Enqueue and resolves pd with its answer.
func (p *ClusterProducer) resend(pd *Pending, m Message, why error) {
	p.mu.Lock()
	if p.retrying++; p.idle == nil {
		p.idle = make(chan struct{})
	}
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			if p.retrying--; p.retrying == 0 {
				close(p.idle)
				p.idle = nil
			}
			p.mu.Unlock()
		}()
		p.c.log.Debug("fila: sending a message again", "queue", m.Queue, "why", why)
		res, err := p.c.Enqueue(p.c.life, m)
		if err != nil {
			pd.resolve(EnqueueResult{Err: err})
			return
		}
		pd.resolve(res[0])
	}()
}

// Flush sends every node's current batch now and waits until every message sent so far has its
// result.
func (p *ClusterProducer) Flush(ctx context.Context) error {
	p.mu.Lock()
	prods := make([]*Producer, 0, len(p.prods))
	for _, prod := range p.prods {
		prods = append(prods, prod)
	}
	p.mu.Unlock()
	for _, prod := range prods {
		if err := prod.Flush(ctx); err != nil {
			return err
		}
	}
	return p.waitRetries(ctx)
}

// waitRetries waits until no message is being sent again.
func (p *ClusterProducer) waitRetries(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close sends what is batched, waits for every result, and stops the producer; later sends fail
// with ErrProducerClosed. It does not close the Cluster.
func (p *ClusterProducer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	prods := p.prods
	p.prods = nil
	p.mu.Unlock()
	for _, prod := range prods {
		prod.Close()
	}
	return p.waitRetries(context.Background())
}
