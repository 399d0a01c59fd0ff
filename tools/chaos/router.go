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
// where to go; the client it dials there has the other nodes as further seeds. With one address
// there is one client. Clients are kept until close, so that the acks of their deliveries still
// have their connection.
type router struct {
	w       Workload
	clients map[string]*fila.Client // by the address dialed first ("" = the workload's seeds)
	leader  map[string]string       // queue -> its leader's address, when known
}

func newRouter(w Workload) *router {
	return &router{w: w, clients: map[string]*fila.Client{}, leader: map[string]string{}}
}

// client returns a client for queue, dialing its leader (or the seeds) when none is open.
func (r *router) client(ctx context.Context, queue string) (*fila.Client, error) {
	addr := r.leader[queue]
	if c := r.clients[addr]; c != nil {
		return c, nil
	}
	seeds := r.w.Addrs
	if addr != "" {
		seeds = []string{addr}
		for _, a := range r.w.Addrs {
			if a != addr {
				seeds = append(seeds, a)
			}
		}
	}
	c, err := fila.DialSeeds(ctx, seeds, clientOptions())
	if err != nil {
		return nil, err
	}
	r.clients[addr] = c
	return c, nil
}

// misrouted reports an answer that says the queue is led elsewhere (or not known here, as a
// node that does not host it answers).
func misrouted(err error) bool {
	return errors.Is(err, fila.ErrNotLeader) || errors.Is(err, fila.ErrQueueNotFound) || errors.Is(err, fila.ErrNodeNotReady)
}

// learn updates where queue is led after err: a NotLeader's leader_addr, else GetRoutes asked
// of the client c when it names another node, else the next address in turn (today's cluster
// nodes answer NotLeader without leader_addr, and GetRoutes with themselves), after a moment.
func (r *router) learn(ctx context.Context, c *fila.Client, queue string, err error) {
	if len(r.w.Addrs) < 2 {
		pause(ctx, 10*time.Millisecond)
		return
	}
	if addr, ok := fila.LeaderAddr(err); ok && addr != "" {
		r.leader[queue] = addr
		return
	}
	if c != nil {
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
