package fila

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/filamq/fila/client/internal/backoff"
	"github.com/filamq/fila/generated/fibp"
)

// Cluster is an application's handle on a Fila cluster: it sends each request to the node that
// can answer it, with a connection per node it needs (a Client without reconnection of its own),
// and keeps working through leader changes and dead nodes.
//
//   - Enqueue goes to each queue's leader. Where the leader is comes from the route hints of
//     EnqueueResult, NotLeader's leader_addr and GetRoutes, and is cached per queue; a queue
//     with no route yet goes to any node, which either forwards it and answers with a hint or
//     answers NotLeader with one. A stale route costs one redirect.
//   - A Consumer subscribes on the queue's leader (following NotLeader) and, when that
//     subscription ends because the leader died or was deposed, subscribes again on the new
//     leader by itself. Messages leased by the old leader that were never acked are delivered
//     again once their lease ends (or, on a queue with fast delivery durability, after the new
//     leader's reclaim grace): that redelivery is the only thing the application sees.
//   - Ack, Nack and ExtendLease of a Delivery go to the node that delivered it; when that node is
//     gone or no longer leads the queue, they are sent to the queue's current leader. So does the
//     lease keep-alive: when the node is gone it extends that node's deliveries there at once (a
//     fast queue's new leader takes them back during its reclaim grace), so a delivery kept alive
//     is not delivered again.
//   - NotLeader, NodeNotReady (an election), AuthStateStale (a node unsure of its keys: another
//     node is tried), ChannelFull (retry_after_ms honoured) and lost connections are retried,
//     with backoff, for at most Options.FailoverTimeout per call (and within its context).
//
// A request whose connection broke before its answer is sent again to another node: it may have
// taken effect the first time. Give messages an IdempotencyKey to make a resent Enqueue safe; an
// Ack resent that way may answer MessageNotFound when the first one was applied.
//
// Every method is safe for concurrent use.
type Cluster struct {
	opts     Options // with defaults
	nodeOpts Options // the nodes' Clients: no reconnection, no connection events
	dial     dialFunc
	log      *slog.Logger
	life     context.Context // ends with Close
	stop     context.CancelFunc

	mu     sync.Mutex
	nodes  map[string]*clusterNode // by address
	addrs  []string                // every address known: the seeds, then the members listed
	home   int                     // addrs[home] takes requests for queues with no route
	routes map[string]string       // queue → its leader's address, as last heard
	closed bool

	plans sync.Map // queue → *queuePlan: what its shards are chosen by (cluster_shardroute.go)
}

// clusterNode is the connection to one node; ready is closed once its dial ended.
type clusterNode struct {
	ready chan struct{}
	c     *Client // nil when the dial failed
	err   error
}

// DefaultFailoverTimeout is Options.FailoverTimeout when it is 0.
const DefaultFailoverTimeout = 30 * time.Second

// DialCluster connects to a cluster through seeds, addresses of some of its nodes. Every seed is
// dialled at once: at least one must answer; a seed that is down is only logged (it may be
// restarting). A seed that is not a FIBP endpoint (ErrHTTPServer, ErrTLSRequired, no FIBP
// handshake), that refuses the handshake (Unauthorized, UnsupportedVersion), or that belongs
// to another cluster than the other seeds is a configuration mistake, and DialCluster fails with
// an error naming it. The nodes the cluster lists (GetClusterStatus) are added to the seeds, so
// that any member can be reached later.
//
// The Options apply to every node's connection, except MaxReconnects, DialRetry and
// ConnectionHandler: the Cluster itself moves to another node when one is lost.
func DialCluster(ctx context.Context, seeds []string, opts *Options) (*Cluster, error) {
	return dialCluster(ctx, seeds, opts.withDefaults(), dialTCP)
}

func dialCluster(ctx context.Context, seeds []string, o Options, dial dialFunc) (*Cluster, error) {
	seeds = slices.Compact(slices.Clone(seeds))
	if len(seeds) == 0 {
		return nil, errors.New("fila: no seed address to dial")
	}
	if o.FailoverTimeout <= 0 {
		o.FailoverTimeout = DefaultFailoverTimeout
	}
	no := o
	no.MaxReconnects, no.DialRetry, no.ConnectionHandler = 0, false, nil
	c := &Cluster{
		opts: o, nodeOpts: no, dial: dial, log: o.Logger,
		nodes: map[string]*clusterNode{}, addrs: seeds, routes: map[string]string{},
	}
	c.life, c.stop = context.WithCancel(context.Background())
	if err := c.checkSeeds(ctx, seeds); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes every node's connection. Consumers stop with ErrClosed; calls in progress fail.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	nodes := c.nodes
	c.nodes = map[string]*clusterNode{}
	c.mu.Unlock()
	c.stop()
	for _, n := range nodes {
		<-n.ready
		if n.c != nil {
			n.c.Close()
		}
	}
	return nil
}

// Nodes returns the addresses the Cluster knows: the seeds and the members the cluster listed.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.addrs)
}

// Route returns the address of queue's leader as last heard, if any.
func (c *Cluster) Route(queue string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.routes[queue]
	return a, ok
}

// Any returns the connection to a node that answers, for requests any node takes (admin
// operations are forwarded to the meta leader by the node; GetRoutes, GetClusterStatus, ...).
// The Client belongs to the Cluster: do not close it. It does not reconnect: after a failure,
// call Any again.
func (c *Cluster) Any(ctx context.Context) (*Client, error) {
	var last error
	for range c.Nodes() {
		addr := c.homeAddr()
		cl, err := c.node(ctx, addr)
		if err == nil {
			return cl, nil
		}
		if ctx.Err() != nil || c.isClosed() {
			return nil, err
		}
		last = err
		c.nodeDown(addr)
	}
	return nil, last
}

// Node returns the connection to the node at addr, dialling it when needed; as for Any, the
// Client belongs to the Cluster.
func (c *Cluster) Node(ctx context.Context, addr string) (*Client, error) { return c.node(ctx, addr) }

func (c *Cluster) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// node returns a live connection to addr, dialling it when there is none (one dial at a time
// per address; concurrent callers wait for it).
func (c *Cluster) node(ctx context.Context, addr string) (*Client, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if n := c.nodes[addr]; n != nil {
		c.mu.Unlock()
		select {
		case <-n.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if n.c != nil && n.c.Err() == nil {
			return n.c, nil
		}
		c.mu.Lock()
		if c.nodes[addr] == n {
			delete(c.nodes, addr) // dead or never up: dial again
		}
		c.mu.Unlock()
		return c.node(ctx, addr)
	}
	n := &clusterNode{ready: make(chan struct{})}
	c.nodes[addr] = n
	c.mu.Unlock()
	cl, err := dialSeeds(ctx, []string{addr}, c.nodeOpts, c.dial)
	if err == nil {
		cl.router = c
	}
	c.mu.Lock()
	n.c, n.err = cl, err
	closed := c.closed
	if err != nil && c.nodes[addr] == n {
		delete(c.nodes, addr)
	}
	c.mu.Unlock()
	close(n.ready)
	if err != nil {
		return nil, err
	}
	if closed {
		cl.Close()
		return nil, ErrClosed
	}
	return cl, nil
}

// homeAddr is the node that takes requests for queues with no route.
func (c *Cluster) homeAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[c.home%len(c.addrs)]
}

// target is where a request for queue goes: its leader as last heard, else the home node.
func (c *Cluster) target(queue string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.routes[queue]; ok {
		return a
	}
	return c.addrs[c.home%len(c.addrs)]
}

// learn records addr as queue's leader; an empty addr forgets the route.
func (c *Cluster) learn(queue, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if addr == "" {
		delete(c.routes, queue)
		return
	}
	c.routes[queue] = addr
	if !slices.Contains(c.addrs, addr) {
		c.addrs = append(c.addrs, addr)
	}
}

// forgetRoute forgets queue's route when it still points to addr.
func (c *Cluster) forgetRoute(queue, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.routes[queue] == addr {
		delete(c.routes, queue)
	}
}

// nodeDown records that addr did not answer (or answered AuthStateStale): the routes to it are
// forgotten, and another node becomes the home node when it was addr.
func (c *Cluster) nodeDown(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, a := range c.routes {
		if a == addr {
			delete(c.routes, q)
		}
	}
	if c.addrs[c.home%len(c.addrs)] == addr {
		c.home = (c.home + 1) % len(c.addrs)
	}
}

// retryClass says what to do about a failed request (or one item of it).
type retryClass int

const (
	retryFinal    retryClass = iota // the answer: give it to the caller
	retryRedirect                   // NotLeader: go to the leader it names (or ask where it is)
	retryWait                       // NodeNotReady, ChannelFull: the same place, after a backoff
	retryMove                       // the node is gone or AuthStateStale: another node
)

// classify sorts err for the retry loops. ctx errors and the Cluster's closing are final.
func (c *Cluster) classify(err error) retryClass {
	if err == nil || c.life.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return retryFinal
	}
	if code, ok := ErrorCode(err); ok {
		switch code {
		case fibp.CodeNotLeader:
			return retryRedirect
		case fibp.CodeNodeNotReady, fibp.CodeChannelFull:
			return retryWait
		case fibp.CodeAuthStateStale:
			return retryMove
		}
		return retryFinal
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrTLSRequired) || errors.Is(err, ErrTLSNotServed) || errors.Is(err, ErrHTTPServer) {
		return retryFinal
	}
	return retryMove // a lost connection or a failed dial
}

// retrier paces one call's retries: backoff between attempts that made no progress, within the
// call's context and Options.FailoverTimeout.
type retrier struct {
	c        *Cluster
	b        backoff.Backoff
	n        int // attempts paused before
	moves    int // nodes left for another
	deadline time.Time
}

func (c *Cluster) retrier() *retrier {
	return &retrier{
		c:        c,
		b:        backoff.Backoff{Initial: 20 * time.Millisecond, Max: time.Second, Rand: backoff.RandFloat},
		deadline: time.Now().Add(c.opts.FailoverTimeout),
	}
}

// pause waits before the next attempt (atLeast at least); it reports false when the
// call must give up (its context ended, FailoverTimeout passed, or the Cluster closed).
func (r *retrier) pause(ctx context.Context, atLeast time.Duration) bool {
	d := max(r.b.Delay(r.n), atLeast)
	r.n++
	if time.Now().Add(d).After(r.deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-r.c.life.Done():
	}
	return false
}

// nodeError names the node a failure came from.
func nodeError(addr string, err error) error {
	return fmt.Errorf("node %s: %w", addr, err)
}
