package broker

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// Forwarding (clustering.md, "Routing"): a node of a cluster hands the Enqueue messages and the
// Ack, Nack and ExtendLease items of its clients for queues another node leads to that node over
// the node link, and answers each item with what the leader answered; an enqueued message's
// result carries the queue's route hint, so a client can go straight to the leader next time.
//
// The node that receives a forwarded request carries it out as its own client's and forwards
// nothing further: an item for a queue it does not lead is answered NotLeader with the leader
// it knows (or NodeNotReady), which the forwarding node passes on.
//
// A forwarder remembers which node leads each queue it forwarded to (learned from its replica's
// Raft group or the placement when a request was refused NotLeader, and from the leader's
// answers). A request for a queue whose leader it remembers is forwarded at once, inside Enqueue
// or the settlement, so the requests of one connection reach the leader in the order they were
// sent. The first request after the route changed is refused by the local replica, looked up and
// forwarded then (the routing answers of routing.go); requests sent while that lookup runs may
// overtake it.
//
// What the leader did is known only from its answer: a forward that fails on the link (the
// leader unreachable, the connection broken, no answer within the link's forward timeout) is
// answered NodeNotReady per item, as the item of a leader deposed mid-round may be — it may or
// may not have been carried out — and the route is forgotten.

// forwardNetwork is the optional side of a Network that hands requests to other nodes
// (nodelink.Link).
type forwardNetwork interface {
	ForwardEnqueue(node meta.NodeID, req *cluster.ForwardEnqueue, done func(*cluster.ForwardEnqueueResult, error))
	ForwardSettle(node meta.NodeID, req *cluster.ForwardSettle, done func(*cluster.ForwardSettleResult, error))
}

// forwarder forwards requests for queues other nodes lead; nil on a single node.
type forwarder struct {
	b   *Broker
	net forwardNetwork

	mu     sync.RWMutex
	routes map[string]meta.NodeID // queue → the other node that leads it, as last learned

	items, failed atomic.Uint64 // items forwarded; of those, items whose forward failed on the link
}

func (f *forwarder) count(items int, err error) {
	f.items.Add(uint64(items))
	if err != nil {
		f.failed.Add(uint64(items))
	}
}

// Forwarded reports how many Enqueue messages and settlement items this node forwarded to
// other nodes, and how many of those failed on the link (answered NodeNotReady).
func (b *Broker) Forwarded() (items, failed uint64) {
	if b.fwd == nil {
		return 0, 0
	}
	return b.fwd.items.Load(), b.fwd.failed.Load()
}

func newForwarder(b *Broker) *forwarder {
	net, ok := b.opts.Cluster.Network.(forwardNetwork)
	if !ok {
		return nil
	}
	f := &forwarder{b: b, net: net, routes: map[string]meta.NodeID{}}
	if reg := b.opts.Registry; reg != nil {
		_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "fila", Name: "cluster_forwarded_total",
			Help: "Enqueue messages and Ack, Nack and ExtendLease items this node forwarded to the leaders of their queues."},
			func() float64 { return float64(f.items.Load()) }))
		_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "fila", Name: "cluster_forward_failures_total",
			Help: "Forwarded items whose forward failed on the node link (answered NodeNotReady)."},
			func() float64 { return float64(f.failed.Load()) }))
	}
	return f
}

// target is the node to forward a request for queue to at once: the leader remembered for it,
// unless this node's replica leads it now ("": serve it here, or find out).
func (f *forwarder) target(r queueRef, queue string) meta.NodeID {
	if r.a != nil && r.a.leadingNow.Load() {
		return ""
	}
	f.mu.RLock()
	to := f.routes[queue]
	f.mu.RUnlock()
	return to
}

// learn remembers that node leads queue ("" or this node: forget it).
func (f *forwarder) learn(queue string, node meta.NodeID) {
	f.mu.Lock()
	if node == "" || node == f.b.nodeID() {
		delete(f.routes, queue)
	} else {
		f.routes[queue] = node
	}
	f.mu.Unlock()
}

// forget drops queue's route when it still names node.
func (f *forwarder) forget(queue string, node meta.NodeID) {
	f.mu.Lock()
	if f.routes[queue] == node {
		delete(f.routes, queue)
	}
	f.mu.Unlock()
}

// forwardParts groups the indices of the items to forward by the node they go to, in the order
// the nodes first appear.
type forwardParts struct {
	nodes []meta.NodeID
	items map[meta.NodeID][]int
	skip  []bool // by item: forwarded (nil: none is)
	bytes int    // the forwarded messages' payload bytes
}

// classify picks the messages to forward at once (target), by queue.
func (f *forwarder) classify(msgs []Message, p *forwardParts) {
	var q string
	var to meta.NodeID
	for i := range msgs {
		m := &msgs[i]
		if i == 0 || m.Queue != q {
			q, to = m.Queue, f.target(f.b.lookup(m.Queue), m.Queue)
		}
		if to != "" {
			p.forward(to, i, len(msgs))
			p.bytes += len(m.Payload)
		}
	}
}

// classifyQueues picks the settlement items to forward at once, by queue.
func (f *forwarder) classifyQueues(queues []string, p *forwardParts) {
	var q string
	var to meta.NodeID
	for i := range queues {
		if i == 0 || queues[i] != q {
			q, to = queues[i], f.target(f.b.lookup(queues[i]), queues[i])
		}
		if to != "" {
			p.forward(to, i, len(queues))
		}
	}
}

// forward adds item i of n to node's part and marks it skipped.
func (p *forwardParts) forward(node meta.NodeID, i, n int) {
	if p.skip == nil {
		p.skip = make([]bool, n)
	}
	p.skip[i] = true
	p.add(node, i)
}

func (p *forwardParts) add(node meta.NodeID, i int) {
	if p.items == nil {
		p.items = map[meta.NodeID][]int{}
	}
	if _, ok := p.items[node]; !ok {
		p.nodes = append(p.nodes, node)
	}
	p.items[node] = append(p.items[node], i)
}

// hint is queue's route hint naming node, made once per queue of a request (hints).
func (f *forwarder) hint(hints map[string]*service.Route, cat *meta.Catalog, queue string, node meta.NodeID) *service.Route {
	if r, ok := hints[queue]; ok {
		return r
	}
	r := route(cat, queue, node)
	hints[queue] = &r
	return &r
}

// enqueue forwards msgs[idx...] to node and fills their results, then calls finish. The
// messages are encoded before it returns.
func (f *forwarder) enqueue(node meta.NodeID, msgs []Message, idx []int, res []EnqueueResult, finish func()) {
	req := &cluster.ForwardEnqueue{Messages: make([]cluster.ForwardMessage, len(idx))}
	for k, i := range idx {
		m := &msgs[i]
		req.Messages[k] = cluster.ForwardMessage{Queue: m.Queue, Headers: m.Headers, Payload: m.Payload,
			FairnessKey: m.FairnessKey, Weight: m.Weight, DelayMs: m.DelayMs,
			IdempotencyKey: m.IdempotencyKey, HasIdempotencyKey: m.HasKey}
	}
	queues := make([]string, len(idx))
	for k, i := range idx {
		queues[k] = msgs[i].Queue
	}
	f.net.ForwardEnqueue(node, req, func(x *cluster.ForwardEnqueueResult, err error) {
		f.count(len(idx), err)
		cat := f.b.catalog()
		hints := map[string]*service.Route{}
		for k, i := range idx {
			q := queues[k]
			r := &res[i]
			switch {
			case err != nil:
				r.Code = CodeNodeNotReady
				f.forget(q, node)
			case x.ErrorCode != 0:
				r.Code = Code(x.ErrorCode)
				r.Leader = f.hint(hints, cat, q, node)
				if r.Code == CodeChannelFull {
					r.Refusal = &Error{Code: CodeChannelFull, Message: x.ErrorMessage, RetryAfterMs: int(x.RetryAfterMs)}
				}
			default:
				it := &x.Results[k]
				r.Code, r.ID, r.Duplicate = Code(it.Code), service.MessageID(it.MessageID), it.Duplicate
				switch r.Code {
				case CodeNotLeader: // the route was stale: pass on what the receiver knows
					leader := nodeOfNumber(cat, it.LeaderNodeID)
					f.learn(q, leader)
					if leader != "" && leader != f.b.nodeID() {
						r.Leader = f.hint(hints, cat, q, leader)
					} else {
						r.Code = CodeNodeNotReady
					}
				case CodeNodeNotReady:
					f.forget(q, node)
				default:
					r.Leader = f.hint(hints, cat, q, node)
				}
			}
		}
		finish()
	})
}

// nodeOfNumber is the node whose ID is the number id, as FIBP and the forwarded answers carry
// it ("" for 0 or a node the catalog does not list).
func nodeOfNumber(cat *meta.Catalog, id uint64) meta.NodeID {
	if id == 0 {
		return ""
	}
	for _, n := range cat.Nodes() {
		if nodeNumber(n.ID) == id {
			return n.ID
		}
	}
	return ""
}

// settle forwards items[idx...] (of queues) to node and fills their codes (ext, for
// ExtendLease), then calls finish.
func (f *forwarder) settle(kind settleKind, node meta.NodeID, queues []string, items []settleItem, idx []int,
	codes []Code, ext []ExtendResult, finish func()) {
	req := &cluster.ForwardSettle{Kind: settleKinds[kind], Items: make([]cluster.ForwardSettleItem, len(idx))}
	self := string(f.b.nodeID())
	for k, i := range idx {
		it := &items[i]
		fi := cluster.ForwardSettleItem{Queue: queues[i], MessageID: wire.UUID(it.id), Error: it.errText, ExtendByMs: it.extendBy}
		if it.session != "" { // a session of this node's, never mistaken for one of the leader's
			fi.Session = self + "/" + it.session
		}
		if it.retryAfter != nil {
			fi.RetryAfterMs, fi.HasRetryAfter = *it.retryAfter, true
		}
		req.Items[k] = fi
	}
	f.net.ForwardSettle(node, req, func(x *cluster.ForwardSettleResult, err error) {
		f.count(len(idx), err)
		for k, i := range idx {
			q := queues[i]
			var r ExtendResult
			switch {
			case err != nil:
				r.Code = CodeNodeNotReady
				f.forget(q, node)
			case x.ErrorCode != 0:
				r.Code = Code(x.ErrorCode)
			default:
				r.Code, r.ExpiresAt = Code(x.Results[k].Code), x.Results[k].ExpiresAt
				switch r.Code {
				case CodeNotLeader, CodeNodeNotReady:
					f.forget(q, node)
				}
			}
			if ext != nil {
				ext[items[i].index] = r
			} else {
				codes[items[i].index] = r.Code
			}
		}
		finish()
	})
}

var settleKinds = [...]cluster.SettleKind{kindAck: cluster.SettleAck, kindNack: cluster.SettleNack, kindExtend: cluster.SettleExtend}

// The receiving side (nodelink.Forwarded).

// ForwardedEnqueue enqueues the messages another node forwarded, as its own client's, and
// answers once each is durable or has failed; it forwards none further. It copies what it keeps
// of req before it returns.
func (b *Broker) ForwardedEnqueue(req *cluster.ForwardEnqueue, answer func(*cluster.ForwardEnqueueResult)) {
	msgs := make([]Message, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		msgs[i] = Message{Queue: m.Queue, Headers: m.Headers, Payload: m.Payload, FairnessKey: m.FairnessKey,
			Weight: m.Weight, DelayMs: m.DelayMs, IdempotencyKey: m.IdempotencyKey, HasKey: m.HasIdempotencyKey}
	}
	b.enqueue(msgs, func(rs []EnqueueResult, e *Error) {
		x := &cluster.ForwardEnqueueResult{}
		if e != nil {
			x.ErrorCode, x.ErrorMessage, x.RetryAfterMs = uint8(e.Code), e.Message, uint32(max(e.RetryAfterMs, 0))
			answer(x)
			return
		}
		x.Results = make([]cluster.ForwardEnqueueItem, len(rs))
		for i := range rs {
			r := &rs[i]
			it := cluster.ForwardEnqueueItem{Code: uint8(r.Code), MessageID: wire.UUID(r.ID), Duplicate: r.Duplicate}
			if r.Code == CodeNotLeader && r.Leader != nil {
				it.LeaderNodeID, it.LeaderAddr = r.Leader.LeaderNodeID, r.Leader.LeaderAddr
			}
			x.Results[i] = it
		}
		answer(x)
	}, nil)
}

// ForwardedSettle carries out the acks, nacks or lease extensions another node forwarded, as
// its own client's; it forwards none further.
func (b *Broker) ForwardedSettle(req *cluster.ForwardSettle, answer func(*cluster.ForwardSettleResult)) {
	n := len(req.Items)
	queues := make([]string, n)
	its := make([]settleItem, n)
	for i := range req.Items {
		it := &req.Items[i]
		queues[i] = it.Queue
		its[i] = settleItem{index: i, id: engine.MsgID(it.MessageID), session: it.Session, errText: it.Error, extendBy: it.ExtendByMs}
		if it.HasRetryAfter {
			v := it.RetryAfterMs
			its[i].retryAfter = &v
		}
	}
	kind := kindAck
	switch req.Kind {
	case cluster.SettleNack:
		kind = kindNack
	case cluster.SettleExtend:
		kind = kindExtend
	}
	codes := make([]Code, n)
	var ext []ExtendResult
	if kind == kindExtend {
		ext = make([]ExtendResult, n)
	}
	b.settleWith(kind, queues, its, codes, ext, func(e *Error) {
		x := &cluster.ForwardSettleResult{}
		if e != nil {
			x.ErrorCode, x.ErrorMessage, x.RetryAfterMs = uint8(e.Code), e.Message, uint32(max(e.RetryAfterMs, 0))
			answer(x)
			return
		}
		x.Results = make([]cluster.ForwardSettleOutcome, n)
		for i := range x.Results {
			if ext != nil {
				x.Results[i] = cluster.ForwardSettleOutcome{Code: uint8(ext[i].Code), ExpiresAt: ext[i].ExpiresAt}
			} else {
				x.Results[i].Code = uint8(codes[i])
			}
		}
		answer(x)
	}, nil)
}
