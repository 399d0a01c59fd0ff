package fila

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// sendItems sends some items of a batch request to one node; it returns one error per index of
// idx (nil: the item's answer is final and recorded by the callback), or the whole request's
// failure.
type sendItems func(ctx context.Context, addr string, cl *Client, idx []int) ([]error, error)

// routeItems sends n items, item i for queue(i), to their queues' leaders through send, and
// retries the items answered NotLeader, NodeNotReady, ChannelFull or AuthStateStale, or whose
// request was lost with its connection, until each has a final answer or the call gives up
// (ctx, Options.FailoverTimeout). It returns each item's last error; err is set only when every
// item failed with the same whole-request failure.
func (c *Cluster) routeItems(ctx context.Context, n int, queue func(int) string, send sendItems) ([]error, error) {
	errs := make([]error, n)
	todo := make([]int, n)
	for i := range todo {
		todo[i] = i
	}
	r := c.retrier()
	var round roundResult
	sent := 0 // the items the last round sent
	for len(todo) > 0 {
		sent = len(todo)
		round = c.settleRound(ctx, r, c.sendRound(ctx, todo, queue, send), queue, errs, todo[:0])
		todo = round.todo
		if len(todo) == 0 {
			break
		}
		if !round.progress || round.retryAfter > 0 {
			if !r.pause(ctx, round.retryAfter) {
				break
			}
		} else if r.n++; time.Now().After(r.deadline) || ctx.Err() != nil {
			break
		}
	}
	// The last round sent every item and each failed as a whole request, the same way: whether
	// the failure is final (ctx ended while sending) or could have been retried.
	if round.frameErr != nil && round.same && sent == n {
		return nil, round.frameErr
	}
	return errs, nil
}

// roundOutcome is what one node answered for the items sent to it in a round.
type roundOutcome struct {
	addr string
	idx  []int
	errs []error // per item, when err is nil
	err  error   // the whole request's failure
}

// sendRound sends the items of todo to their queues' leaders as last heard, one request per node,
// to every node at once. The common case, every item for one node, is sent on the caller's
// goroutine.
func (c *Cluster) sendRound(ctx context.Context, todo []int, queue func(int) string, send sendItems) []roundOutcome {
	var outs []roundOutcome // one per node, idx filled in todo's order
	lastQueue, lastAddr := "", ""
	for k, i := range todo {
		if q := queue(i); k == 0 || q != lastQueue {
			lastQueue, lastAddr = q, c.target(q)
		}
		at := len(outs) - 1
		for at >= 0 && outs[at].addr != lastAddr {
			at--
		}
		if at < 0 {
			at = len(outs)
			outs = append(outs, roundOutcome{addr: lastAddr, idx: make([]int, 0, len(todo)-k)})
		}
		outs[at].idx = append(outs[at].idx, i)
	}
	sendTo := func(o *roundOutcome) {
		cl, err := c.node(ctx, o.addr)
		if err == nil {
			o.errs, o.err = send(ctx, o.addr, cl, o.idx)
		} else {
			o.err = nodeError(o.addr, err)
		}
	}
	if len(outs) == 1 {
		sendTo(&outs[0])
		return outs
	}
	var wg sync.WaitGroup
	for k := range outs {
		wg.Go(func() { sendTo(&outs[k]) })
	}
	wg.Wait()
	return outs
}

// roundResult is what a round leaves to do.
type roundResult struct {
	todo       []int         // the items to send again
	progress   bool          // a retry may go somewhere new at once
	retryAfter time.Duration // the longest pause a node asked for
	frameErr   error         // the last whole-request failure
	same       bool          // every item had frameErr
}

// settleRound records each item's answer in errs and learns from it (routes, nodes down),
// appending to todo the items to send again.
func (c *Cluster) settleRound(ctx context.Context, r *retrier, outs []roundOutcome, queue func(int) string, errs []error, todo []int) roundResult {
	res := roundResult{todo: todo, same: true}
	for _, o := range outs {
		if o.err != nil {
			if res.frameErr != nil && res.frameErr.Error() != o.err.Error() {
				res.same = false
			}
			res.frameErr = o.err
		} else {
			res.same = false
		}
		for k, i := range o.idx {
			err := o.err
			if err == nil {
				err = o.errs[k]
			}
			errs[i] = err
			switch c.classify(err) {
			case retryFinal:
				continue
			case retryRedirect:
				if a, ok := c.Route(queue(i)); ok && a != o.addr {
					res.progress = true // a hint named the leader
				} else {
					c.forgetRoute(queue(i), o.addr)
					c.lookUp(ctx, queue(i), o.addr)
				}
			case retryWait:
				if ra, ok := RetryAfter(err); ok {
					res.retryAfter = max(res.retryAfter, ra)
				} else {
					c.forgetRoute(queue(i), o.addr)
				}
			case retryMove:
				c.nodeDown(o.addr)
				// Another node at once, but a pause after trying them all: no busy loop
				// while none answers.
				if r.moves++; r.moves%len(c.Nodes()) != 0 {
					res.progress = true
				}
			}
			res.todo = append(res.todo, i)
		}
	}
	return res
}

// findLeaders asks for the leaders of the items' queues whose leader the Cluster does not know
// (after a failover: the old leader's routes are forgotten) before a settlement is sent. A
// settlement sent to a node that does not lead its queue is forwarded, and the leader takes a
// forwarded one as another connection's: an ExtendLease that takes a fast queue's lease back
// during its reclaim grace would bind the lease to that other connection, and the consumer's own
// ack on its new subscription's connection would then be refused MessageNotFound. Sent straight
// to the leader, the settlements go over the connection the consumer's subscription uses there.
func (c *Cluster) findLeaders(ctx context.Context, n int, queue func(int) string) {
	var missing []string
	for i := range n {
		if q := queue(i); !slices.Contains(missing, q) {
			if _, ok := c.Route(q); !ok {
				missing = append(missing, q)
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	cl, err := c.node(ctx, c.homeAddr())
	if err != nil {
		return // routeItems finds another node
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	routes, err := cl.GetRoutes(ctx, missing...)
	if err != nil {
		return
	}
	for _, r := range routes {
		if r.LeaderAddr != "" {
			c.learn(r.Queue, r.LeaderAddr)
		}
	}
}

// lookUp asks the node at addr (or any) where queue's leader is, and records it.
func (c *Cluster) lookUp(ctx context.Context, queue, addr string) {
	cl, err := c.node(ctx, addr)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	routes, err := cl.GetRoutes(ctx, queue)
	if err != nil || len(routes) == 0 || routes[0].LeaderAddr == "" || routes[0].LeaderAddr == addr {
		return
	}
	c.learn(queue, routes[0].LeaderAddr)
}

// Enqueue sends msgs to their queues' leaders, one Enqueue frame per node, and returns one
// result per message, in order. Messages answered NotLeader go to the leader it names, those
// answered NodeNotReady, ChannelFull or AuthStateStale (or lost with a connection) are sent
// again, within ctx and Options.FailoverTimeout; each result is the message's final answer or
// its last failure. The error is set only when every message failed the same way as a whole
// request (a refused key, ctx ending, no node answering).
func (c *Cluster) Enqueue(ctx context.Context, msgs ...Message) ([]EnqueueResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for i := range msgs {
		if err := msgs[i].check(); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	msgs = injectAll(c.opts.Propagator, ctx, msgs)
	wired := make([]fibp.EnqueueMessage, len(msgs))
	for i := range msgs {
		wired[i] = msgs[i].wire()
	}
	out := make([]EnqueueResult, len(msgs))
	keys := make([]string, len(msgs)) // what each message is routed by: its queue, or its shard's group (cluster_shardroute.go)
	for i := range msgs {
		keys[i] = c.routeKey(&msgs[i])
	}
	errs, err := c.routeItems(ctx, len(msgs), func(i int) string { return keys[i] },
		func(ctx context.Context, addr string, cl *Client, idx []int) ([]error, error) {
			req := &fibp.Enqueue{Messages: wired}
			if len(idx) < len(wired) { // the items are in order: all of them is the whole batch
				req.Messages = make([]fibp.EnqueueMessage, len(idx))
				for k, i := range idx {
					req.Messages[k] = wired[i]
				}
			}
			res, err := cl.enqueueFrame(ctx, req, nil, false)
			if err != nil {
				return nil, nodeError(addr, err)
			}
			var hinted []string // the queues whose leader this answer told, usually one
			for _, h := range res.RouteHints {
				if h.LeaderAddr != "" { // empty: the node does not know its address yet
					c.learn(h.Queue, h.LeaderAddr)
				}
				hinted = append(hinted, h.Queue)
			}
			rs := out // the whole batch went here: its results are the call's
			if len(idx) < len(wired) {
				rs = make([]EnqueueResult, len(idx))
			}
			enqueueResultsInto(rs, req, res)
			errs := make([]error, len(idx))
			for k, i := range idx {
				out[i] = rs[k]
				errs[k] = rs[k].Err
				if q := keys[i]; rs[k].Err == nil && !slices.Contains(hinted, q) {
					hinted = append(hinted, q)
					c.learn(q, addr) // taken without a hint: this node leads the queue
				}
			}
			return errs, nil
		})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Err = errs[i]; errs[i] != nil {
			out[i].ID, out[i].Duplicate = MessageID{}, false
		}
	}
	return out, nil
}

// Ack acknowledges items at their queues' leaders; one error per item, in order (see Enqueue
// for the retries). An item whose request was lost with its connection and sent again may
// answer MessageNotFound: the first Ack may have been applied.
func (c *Cluster) Ack(ctx context.Context, items ...AckItem) ([]error, error) {
	c.findLeaders(ctx, len(items), func(i int) string { return items[i].Queue })
	return c.routeItems(ctx, len(items), func(i int) string { return items[i].Queue },
		func(ctx context.Context, addr string, cl *Client, idx []int) ([]error, error) {
			sub := make([]AckItem, len(idx))
			for k, i := range idx {
				sub[k] = items[i]
			}
			errs, err := cl.Ack(ctx, sub...)
			if err != nil {
				return nil, nodeError(addr, err)
			}
			return errs, nil
		})
}

// Nack reports failed attempts at their queues' leaders; results as for Ack.
func (c *Cluster) Nack(ctx context.Context, items ...NackItem) ([]error, error) {
	c.findLeaders(ctx, len(items), func(i int) string { return items[i].Queue })
	return c.routeItems(ctx, len(items), func(i int) string { return items[i].Queue },
		func(ctx context.Context, addr string, cl *Client, idx []int) ([]error, error) {
			sub := make([]NackItem, len(idx))
			for k, i := range idx {
				sub[k] = items[i]
			}
			errs, err := cl.Nack(ctx, sub...)
			if err != nil {
				return nil, nodeError(addr, err)
			}
			return errs, nil
		})
}

// ExtendLease extends leases at their queues' leaders; results as for Client.ExtendLease.
func (c *Cluster) ExtendLease(ctx context.Context, items ...ExtendLeaseItem) ([]ExtendLeaseResult, error) {
	c.findLeaders(ctx, len(items), func(i int) string { return items[i].Queue })
	out := make([]ExtendLeaseResult, len(items))
	errs, err := c.routeItems(ctx, len(items), func(i int) string { return items[i].Queue },
		func(ctx context.Context, addr string, cl *Client, idx []int) ([]error, error) {
			sub := make([]ExtendLeaseItem, len(idx))
			for k, i := range idx {
				sub[k] = items[i]
			}
			res, err := cl.ExtendLease(ctx, sub...)
			if err != nil {
				return nil, nodeError(addr, err)
			}
			errs := make([]error, len(idx))
			for k, i := range idx {
				out[i], errs[k] = res[k], res[k].Err
			}
			return errs, nil
		})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Err = errs[i]; errs[i] != nil {
			out[i].ExpiresAt = time.Time{}
		}
	}
	return out, nil
}

// settleRouter is what a node's Client asks when a Delivery's Ack, Nack or Extend failed on the
// node that delivered it because that node is gone or no longer leads the queue: the Cluster
// sends it to the queue's current leader.
type settleRouter interface {
	rerouteable(err error) bool
	Ack(ctx context.Context, items ...AckItem) ([]error, error)
	Nack(ctx context.Context, items ...NackItem) ([]error, error)
	ExtendLease(ctx context.Context, items ...ExtendLeaseItem) ([]ExtendLeaseResult, error)
}

// rerouteable reports a Delivery's settlement failure that another node may not have.
func (c *Cluster) rerouteable(err error) bool {
	k := c.classify(err)
	return k == retryRedirect || k == retryWait || k == retryMove
}

// firstErr is the answer of a one-item request sent through a settleRouter.
func firstErr(errs []error, err error) error {
	if err != nil {
		return err
	}
	return errs[0]
}
