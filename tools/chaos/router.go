package chaos

import (
	"context"
	"errors"
	"time"

	"github.com/filamq/fila/client/fila"
)

// router gives one goroutine of the workload a client connected to the node that leads a
// queue. The SDK does not follow NotLeader (nor GetRoutes) by itself yet, so the workload does,
// as a client of a cluster must: a NotLeader answer's leader_addr, else GetRoutes, tells it
// where to go. Each client the router dials for a node has that node's address alone, so that
// it reconnects to that node and no other: a client with the others as further seeds moved to
// another node when its own went down, stayed there, and a NotLeader naming the node it was
// dialed for sent the workload back to it, round and round (an 18 s window of a 120 s run in
// which every producer and consumer asked node 1 again and again, told each time that node 3
// led). A client that is not connected (its node is down, or paused and its keep-alive Pong
// missed) is not used: the router tries another node. Clients are kept until close, so that
// the acks of their deliveries still have their connection. With one address there is one
// client, with reconnection to it.
type router struct {
	w       Workload
	rec     *Recorder               // where a node passed over is recorded (a Dial op), when set
	by      int                     // the workload's client the router works for
	clients map[string]*fila.Client // by the node's address ("" = the one address there is)
	leader  map[string]string       // queue -> its leader's address, when known
}

// errNotConnected is the router's answer for a node whose client is reconnecting.
var errNotConnected = errors.New("chaos: the client of this node is reconnecting")

func newRouter(w Workload, rec *Recorder, client int) *router {
	return &router{w: w, rec: rec, by: client, clients: map[string]*fila.Client{}, leader: map[string]string{}}
}

// client returns a client for queue, dialing its leader (at first, the first node) when none
// is open. It fails for a node that refused the dial or did not answer it within a second, or
// that its client is reconnecting to.
func (r *router) client(ctx context.Context, queue string) (*fila.Client, error) {
	addr := r.leader[queue]
	switch {
	case len(r.w.Addrs) < 2:
		addr = ""
	case addr == "": // start with the first node, so that learn's next node is another one
		addr = r.w.Addrs[0]
		r.leader[queue] = addr
	}
	if c := r.clients[addr]; c != nil {
		if addr != "" && !c.Connected() {
			r.passedOver(queue, addr, c.NodeID(), r.now(), errNotConnected)
			return nil, errNotConnected
		}
		return c, nil
	}
	start := r.now()
	seeds, opts, wait := r.w.Addrs, clientOptions(), r.w.OpTimeout
	if addr != "" { // a node that refuses or does not answer at once: try another
		seeds, opts.DialRetry, wait = []string{addr}, false, min(wait, time.Second)
	}
	dctx, cancel := context.WithTimeout(ctx, wait)
	c, err := fila.DialSeeds(dctx, seeds, opts)
	cancel()
	if err != nil {
		r.passedOver(queue, addr, 0, start, err)
		return nil, err
	}
	r.clients[addr] = c
	return c, nil
}

func (r *router) now() time.Duration {
	if r.rec == nil {
		return 0
	}
	return r.rec.Now()
}

// passedOver records a node the router could not use for queue (Kind Dial).
func (r *router) passedOver(queue, addr string, node uint64, start time.Duration, err error) {
	if r.rec != nil {
		r.rec.Add(Op{Client: r.by, Kind: Dial, Value: addr, Queue: queue, Node: node, Outcome: Unknown,
			Invoke: start, Complete: r.rec.Now(), Err: err.Error()})
	}
}

// misrouted reports an answer that says the queue is led elsewhere (or not known here, as a
// node that does not host it answers).
func misrouted(err error) bool {
	return errors.Is(err, fila.ErrNotLeader) || errors.Is(err, fila.ErrQueueNotFound) || errors.Is(err, fila.ErrNodeNotReady)
}

// learn updates where queue is led after err: a NotLeader's leader_addr, else GetRoutes asked
// of the client c (when err is a node's answer) when it names another node, else the next
// address in turn, after a moment (perhaps an election is under way, or the node is down).
func (r *router) learn(ctx context.Context, c *fila.Client, queue string, err error) {
	if len(r.w.Addrs) < 2 {
		pause(ctx, 10*time.Millisecond)
		return
	}
	if addr, ok := fila.LeaderAddr(err); ok && addr != "" {
		r.leader[queue] = addr
		return
	}
	if c != nil && misrouted(err) && c.Connected() { // a node's answer: ask it where the leader is
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		routes, rerr := c.GetRoutes(rctx, queue)
		cancel()
		if rerr == nil && len(routes) == 1 && routes[0].LeaderAddr != "" && routes[0].LeaderAddr != r.leader[queue] {
			r.leader[queue] = routes[0].LeaderAddr
			return
		}
	}
	next := r.w.Addrs[0]
	for i, a := range r.w.Addrs {
		if a == r.leader[queue] {
			next = r.w.Addrs[(i+1)%len(r.w.Addrs)]
		}
	}
	r.leader[queue] = next
	pause(ctx, 10*time.Millisecond) // perhaps an election: no leader yet
}

func (r *router) close() {
	for _, c := range r.clients {
		c.Close()
	}
}
